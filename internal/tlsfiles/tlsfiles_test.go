package tlsfiles_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/internal/tlsfiles/tlstest"
)

func TestLoadRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	other := tlstest.NewCA(t, "other")
	cert, key := ca.WritePair(t, dir, "a", "a", "localhost")
	_, otherKey := other.WritePair(t, dir, "b", "b", "localhost")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files tlsfiles.Files
		want  string // in the error
	}{
		{"cert without key", tlsfiles.Files{Cert: cert}, "needs its key"},
		{"key without cert", tlsfiles.Files{Key: key}, "needs its key"},
		{"missing file", tlsfiles.Files{Cert: cert, Key: filepath.Join(dir, "nope.key")}, "nope.key"},
		{"key of another certificate", tlsfiles.Files{Cert: cert, Key: otherKey}, cert},
		{"CA without a certificate", tlsfiles.Files{Cert: cert, Key: key, CA: notPEM}, "not.pem: no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tlsfiles.Load(tc.files, 0, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load(%+v) = %v, want an error naming %q", tc.files, err, tc.want)
			}
		})
	}
}

// serve accepts TLS connections on a loopback listener until the test
// ends, completing each handshake and closing it.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if err := c.(*tls.Conn).Handshake(); err != nil {
					return
				}
				c.Read(make([]byte, 1)) // until the client hangs up
			}()
		}
	}()
	return ln.Addr().String()
}

// peerName dials addr trusting roots, presenting client (if any), and
// returns the common name of the server's certificate.
func peerName(t *testing.T, addr string, roots []byte, client *tls.Certificate) (string, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"h2"}}
	if client != nil {
		cfg.Certificates = []tls.Certificate{*client}
	}
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	// TLS 1.3: a refused client certificate shows at the first read.
	c.Write([]byte("x"))
	if _, err := c.Read(make([]byte, 1)); err != nil && !strings.Contains(err.Error(), "EOF") {
		return "", err
	}
	if got := c.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Errorf("ALPN = %q, want h2", got)
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func TestServerMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	other := tlstest.NewCA(t, "other")
	cert, key := ca.WritePair(t, dir, "server", "server", "localhost")
	s, err := tlsfiles.Load(tlsfiles.Files{Cert: cert, Key: key, CA: ca.WriteCA(t, dir, "ca.crt")}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.ServerConfig())
	pair := func(ca *tlstest.CA) *tls.Certificate {
		c, k := ca.Issue(t, "client")
		kp, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &kp
	}
	for _, tc := range []struct {
		name   string
		client *tls.Certificate
		ok     bool
	}{
		{"no client certificate", nil, false},
		{"signed by another CA", pair(other), false},
		{"signed by the CA", pair(ca), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name, err := peerName(t, addr, ca.PEM, tc.client)
			if (err == nil) != tc.ok {
				t.Errorf("handshake error = %v, want ok=%v", err, tc.ok)
			}
			if tc.ok && name != "server" {
				t.Errorf("server's name = %q, want server", name)
			}
		})
	}
}

// TestServerRotation: files replaced on disk are served at the next
// handshake after the interval (every handshake here); a pair that does
// not match keeps the previous one in use.
func TestServerRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.WritePair(t, dir, "server", "first", "localhost")
	s, err := tlsfiles.Load(tlsfiles.Files{Cert: cert, Key: key}, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, s.ServerConfig())
	check := func(step, want string) {
		t.Helper()
		got, err := peerName(t, addr, ca.PEM, nil)
		if err != nil || got != want {
			t.Fatalf("%s: server's name = %q, %v; want %q", step, got, err, want)
		}
	}
	check("at start", "first")
	ca.WritePair(t, dir, "server", "second", "localhost")
	check("after a rotation", "second")

	// Half replaced: the new certificate beside the old key.
	newCert, _ := ca.Issue(t, "third", "localhost")
	if err := os.WriteFile(cert, newCert, 0o600); err != nil {
		t.Fatal(err)
	}
	check("with a certificate that its key does not match", "second")
	ca.WritePair(t, dir, "server", "fourth", "localhost")
	check("once the pair matches again", "fourth")
}
