// Package tlsfiles serves TLS from PEM files that are read again when
// they change on disk, so that a certificate replaced by its issuer (a
// Kubernetes Secret volume swapping its files, cert-manager renewing one)
// is used for new connections without a restart.
package tlsfiles

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
)

// DefaultInterval is how often, at most, a [Source] reads its files
// again: a handshake after it reads them, one within it uses what was
// read last.
const DefaultInterval = time.Second

// Files names the PEM files of one side of a TLS connection.
type Files struct {
	// Cert and Key are the certificate chain and its private key, both
	// or neither: what this side presents. A server needs them.
	Cert, Key string
	// CA is the bundle the peer's certificate must be signed by. On a
	// server it requires a client certificate (mutual TLS); on a client
	// it replaces the system's roots. Empty: a server asks for no
	// client certificate, a client trusts the system's roots.
	CA string
}

// FileError is a file that cannot be read or does not hold what it
// should: Path is the file's path as given in [Files].
type FileError struct {
	Path string
	Err  error
}

// Error returns "path: reason".
func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }

// Unwrap returns e.Err.
func (e *FileError) Unwrap() error { return e.Err }

// Source holds what Files' files held when last read, and reads them
// again at most once per interval when a handshake needs them. A change
// that does not parse (a key that does not match its certificate, as
// while the two files are being replaced one after the other) is logged
// and the previous content stays in use. A Source is safe for concurrent
// use by multiple goroutines.
type Source struct {
	files    Files
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex // guards the fields below
	checked time.Time  // when the files were last read
	raw     [3][]byte  // cert, key and CA as last read, parsed or not
	readErr string     // the last read error logged; "" once they read
	cert    *tls.Certificate
	pool    *x509.CertPool
}

// Load reads and checks f's files and returns their Source, which reads
// them again at most once per interval (zero: [DefaultInterval]; a
// negative interval reads them at every handshake). The error names the
// file that cannot be read or does not hold what it should (a
// [*FileError]; a pair that does not match names the certificate). Rejected
// changes later are logged on log (nil: not at all).
func Load(f Files, interval time.Duration, log *slog.Logger) (*Source, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("tlsfiles: a certificate needs its key, and a key its certificate")
	}
	if interval == 0 {
		interval = DefaultInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{files: f, interval: interval, log: log}
	raw, err := s.read()
	if err != nil {
		return nil, err
	}
	if s.cert, s.pool, err = s.parse(raw); err != nil {
		return nil, err
	}
	s.raw, s.checked = raw, time.Now()
	return s, nil
}

// read reads the files that are set.
func (s *Source) read() (raw [3][]byte, err error) {
	for i, path := range []string{s.files.Cert, s.files.Key, s.files.CA} {
		if path == "" {
			continue
		}
		if raw[i], err = os.ReadFile(path); err != nil {
			return raw, &FileError{Path: path, Err: err}
		}
	}
	return raw, nil
}

// parse turns raw into a certificate (nil without one) and a pool (nil
// without a CA). The error names the file at fault.
func (s *Source) parse(raw [3][]byte) (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if s.files.Cert != "" {
		c, err := tls.X509KeyPair(raw[0], raw[1])
		if err != nil {
			return nil, nil, &FileError{Path: s.files.Cert, Err: fmt.Errorf("with the key %s: %w", s.files.Key, err)}
		}
		cert = &c
	}
	var pool *x509.CertPool
	if s.files.CA != "" {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw[2]) {
			return nil, nil, &FileError{Path: s.files.CA, Err: errors.New("no PEM certificate in it")}
		}
	}
	return cert, pool, nil
}

// current returns the certificate and pool in use, having read the files
// again when interval has passed since the last read. One handshake reads
// them, outside the lock; the others meanwhile use what was read last.
func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	cert, pool := s.cert, s.pool
	due := s.interval <= 0 || time.Since(s.checked) >= s.interval
	if due {
		s.checked = time.Now()
	}
	s.mu.Unlock()
	if !due {
		return cert, pool
	}
	raw, err := s.read()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err != nil:
		if msg := err.Error(); msg != s.readErr {
			s.readErr = msg // logged again only once it changes
			s.log.Warn("TLS files unreadable; keeping the certificates in use", "err", err)
		}
		return s.cert, s.pool
	case bytes.Equal(raw[0], s.raw[0]) && bytes.Equal(raw[1], s.raw[1]) && bytes.Equal(raw[2], s.raw[2]):
		s.readErr = ""
		return s.cert, s.pool
	}
	s.readErr = ""
	// The files' content is noted whether it loads or not: a rejected
	// change (perhaps half replaced) is logged once, and read again at
	// the next interval.
	s.raw = raw
	cert, pool, err = s.parse(raw)
	if err != nil {
		s.log.Warn("TLS files changed but rejected; keeping the certificates in use", "err", err)
		return s.cert, s.pool
	}
	s.cert, s.pool = cert, pool
	s.log.Info("TLS files reloaded", "cert", s.files.Cert, "ca", s.files.CA)
	return cert, pool
}

// ServerConfig returns a server's configuration: the current certificate
// at every handshake, HTTP/2 (ALPN h2), TLS 1.2 or later, and with a CA
// a client certificate signed by it required.
func (s *Source) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
			if cert != nil {
				c.Certificates = []tls.Certificate{*cert}
			}
			if pool != nil {
				c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
			}
			return c, nil
		},
	}
}

// clientConfig returns a client's configuration with the current files:
// the certificate presented (when set), the CA trusted (when set).
func (s *Source) clientConfig() *tls.Config {
	cert, pool := s.current()
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, NextProtos: []string{"h2"}}
	if cert != nil {
		c.Certificates = []tls.Certificate{*cert}
	}
	return c
}

// ClientCredentials returns gRPC transport credentials that dial with
// the current files at every handshake, checking the server's
// certificate against the dialled host name (or serverName, when set).
func (s *Source) ClientCredentials(serverName string) credentials.TransportCredentials {
	return clientCreds{s: s, serverName: serverName}
}

// clientCreds are gRPC TLS credentials built anew for each handshake.
type clientCreds struct {
	s          *Source
	serverName string
}

func (c clientCreds) tls() credentials.TransportCredentials {
	cfg := c.s.clientConfig()
	cfg.ServerName = c.serverName
	return credentials.NewTLS(cfg)
}

// ClientHandshake implements credentials.TransportCredentials.
func (c clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.tls().ClientHandshake(ctx, authority, conn)
}

// ServerHandshake implements credentials.TransportCredentials: these
// credentials are a client's only.
func (c clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsfiles: client credentials cannot serve")
}

// Info implements credentials.TransportCredentials.
func (c clientCreds) Info() credentials.ProtocolInfo { return c.tls().Info() }

// Clone implements credentials.TransportCredentials.
func (c clientCreds) Clone() credentials.TransportCredentials { return c }

// OverrideServerName implements credentials.TransportCredentials
// (deprecated there).
func (c clientCreds) OverrideServerName(string) error { return nil }
