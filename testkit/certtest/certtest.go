// Package certtest makes a throw-away public key infrastructure for tests
// of TLS connections: a CA, a server certificate for the loopback
// addresses (127.0.0.1, ::1, localhost) and a client certificate, all
// signed by that CA, written as PEM files into the test's temporary
// directory. A second, unrelated CA stands for "a certificate nobody here
// trusts".
package certtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// PKI is a CA and the certificates it signed, as files and as parsed
// values. Keys are ECDSA P-256 in PKCS#8 PEM, which Go, OpenSSL 1.1 (the
// Debian ClickHouse 18.16) and current OpenSSL all read.
type PKI struct {
	Dir string // the directory holding the files

	CAFile     string // PEM CA certificate
	ServerCert string // PEM server certificate (127.0.0.1, ::1, localhost)
	ServerKey  string // PEM server key
	ClientCert string // PEM client certificate (CN "trawl-client")
	ClientKey  string // PEM client key

	CAPool *x509.CertPool // holds the CA certificate
	Server tls.Certificate
	Client tls.Certificate
}

// New generates a CA with a server and a client certificate into a fresh
// temporary directory of t (names prefixed by name, so that two PKIs of
// one test do not clash).
func New(t testing.TB, name string) *PKI {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	caKey := newKey(t)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("create CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	p := &PKI{Dir: dir, CAPool: x509.NewCertPool()}
	p.CAPool.AddCert(ca)
	p.CAFile = writePEM(t, dir, "ca.crt", "CERTIFICATE", caDER)

	leaf := func(cn string, usage x509.ExtKeyUsage, server bool) (certFile, keyFile string, pair tls.Certificate) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: serial(t),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
			tmpl.DNSNames = []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("create %s certificate: %v", cn, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certFile = writePEM(t, dir, cn+".crt", "CERTIFICATE", der)
		keyFile = writePEM(t, dir, cn+".key", "PRIVATE KEY", keyDER)
		pair, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return certFile, keyFile, pair
	}
	p.ServerCert, p.ServerKey, p.Server = leaf("server", x509.ExtKeyUsageServerAuth, true)
	p.ClientCert, p.ClientKey, p.Client = leaf("trawl-client", x509.ExtKeyUsageClientAuth, false)
	return p
}

// ServerTLS returns a server configuration presenting the server
// certificate; with clientCA it requires a client certificate signed by
// this CA (mutual TLS).
func (p *PKI) ServerTLS(clientCA bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{p.Server}, MinVersion: tls.VersionTLS12}
	if clientCA {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = p.CAPool
	}
	return c
}

// WriteSecret writes a secret (a password) into a file of the PKI's
// directory, readable by its owner only, and returns its path.
func (p *PKI) WriteSecret(t testing.TB, name, secret string) string {
	t.Helper()
	path := filepath.Join(p.Dir, name)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return path
}
