package apptest

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate/tollgate/faces/rls/rlsxds/xdstest"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/internal/tlsfiles/tlstest"
)

// EnvoyGateway is what Envoy Gateway gives the rate limit service it
// deploys: its certificates in a Secret volume (tls.crt, tls.key,
// ca.crt, for localhost and 127.0.0.1 here), an xDS server requiring a
// client certificate signed by that CA (node envoy-ratelimit), and the
// container's environment, on loopback ports.
type EnvoyGateway struct {
	// CA signs every certificate.
	CA *tlstest.CA
	// Certs is the Secret's directory.
	Certs string
	// XDS is the controller's xDS server.
	XDS *xdstest.Server
	// Environ is the environment of envoyproxy/ratelimit's container as
	// Envoy Gateway renders it (Prometheus on, no Redis: add REDIS_*),
	// with HOST, PORT, GRPC_HOST, GRPC_PORT and PROMETHEUS_ADDR on
	// loopback and free ports, and apptest's own listeners unset.
	Environ []string
}

// NewEnvoyGateway starts the xDS server (stopped when t ends) and writes
// the certificates.
func NewEnvoyGateway(t testing.TB) *EnvoyGateway {
	t.Helper()
	eg := &EnvoyGateway{CA: tlstest.NewCA(t, "envoy-gateway"), Certs: t.TempDir()}
	caPath := eg.CA.WriteCA(t, eg.Certs, "ca.crt")
	eg.CA.WritePair(t, eg.Certs, "tls", "envoy", "localhost", "127.0.0.1")
	srvCert, srvKey := eg.CA.WritePair(t, t.TempDir(), "xds", "envoy-gateway", "localhost")
	srvFiles, err := tlsfiles.Load(tlsfiles.Files{Cert: srvCert, Key: srvKey, CA: caPath}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	eg.XDS = xdstest.New("envoy-ratelimit", grpc.Creds(credentials.NewTLS(srvFiles.ServerConfig())))
	addr := eg.XDS.Start(t, "")
	cert, key := filepath.Join(eg.Certs, "tls.crt"), filepath.Join(eg.Certs, "tls.key")
	eg.Environ = []string{
		"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info", "USE_STATSD=false",
		"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=localhost:" + addr[strings.LastIndexByte(addr, ':')+1:],
		"CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + cert, "GRPC_SERVER_TLS_KEY=" + key, "GRPC_SERVER_TLS_CA_CERT=" + caPath,
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + cert, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + key,
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + caPath, "FORCE_START_WITHOUT_INITIAL_CONFIG=true",
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml",
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
		"TOLLGATE_LISTEN_ADDR=", "TOLLGATE_ADMIN_ADDR=",
	}
	return eg
}

// Start runs tollgate as /bin/ratelimit with eg's environment and
// environ added (values in environ win).
func (eg *EnvoyGateway) Start(t testing.TB, environ ...string) *Gateway {
	t.Helper()
	return StartArgs(t, []string{"/bin/ratelimit"}, append(append([]string(nil), eg.Environ...), environ...)...)
}
