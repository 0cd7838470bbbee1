// Package tlsfiles builds the client side of a TLS connection from PEM
// files (the CA that signs the server's certificate, an optional client
// certificate and key for mutual TLS, the server name to verify) and reads
// secrets (passwords) from files. The Kafka and ClickHouse adapters share
// it so that both take their security settings the same way: paths in
// flags and CRAWLER_* variables, the secrets themselves only in files
// (Kubernetes secrets and compose secrets are mounted as files), never on
// a command line or in a log.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Config is the client TLS configuration of one kind of server. Its flags
// are registered under a prefix: "kafka" gives --kafka-tls,
// --kafka-tls-ca-file, and so on.
type Config struct {
	Enabled            bool   // flag <prefix>-tls: connect with TLS
	CAFile             string // flag <prefix>-tls-ca-file: PEM CA certificates trusted for the server (empty: the system's roots)
	CertFile           string // flag <prefix>-tls-cert-file: PEM client certificate (mutual TLS), with KeyFile
	KeyFile            string // flag <prefix>-tls-key-file: PEM private key of CertFile
	ServerName         string // flag <prefix>-tls-server-name: name verified in the server's certificate (empty: the host dialled)
	InsecureSkipVerify bool   // flag <prefix>-tls-insecure-skip-verify: accept any server certificate (testing only)
}

// RegisterFlags binds the fields to flags named <prefix>-tls… . what names
// the server in the usage texts ("Kafka brokers").
func (c *Config) RegisterFlags(fs *flag.FlagSet, prefix, what string) {
	fs.BoolVar(&c.Enabled, prefix+"-tls", false, "connect to the "+what+" with TLS (implied by the other "+prefix+"-tls-… flags)")
	fs.StringVar(&c.CAFile, prefix+"-tls-ca-file", "", "PEM file of the CA certificates that sign the "+what+"' certificates (default: the system's trusted roots)")
	fs.StringVar(&c.CertFile, prefix+"-tls-cert-file", "", "PEM client certificate for mutual TLS with the "+what+" (with -"+prefix+"-tls-key-file)")
	fs.StringVar(&c.KeyFile, prefix+"-tls-key-file", "", "PEM private key of -"+prefix+"-tls-cert-file")
	fs.StringVar(&c.ServerName, prefix+"-tls-server-name", "", "name to verify in the "+what+"' certificates (default: the host of the address dialled)")
	fs.BoolVar(&c.InsecureSkipVerify, prefix+"-tls-insecure-skip-verify", false, "accept any certificate of the "+what+" (encrypts but does not authenticate them: testing only)")
}

// On reports whether TLS is used: Enabled, or any file or name given (a
// CA file without --…-tls is TLS meant, not a setting to ignore).
func (c Config) On() bool {
	return c.Enabled || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify
}

// Load returns the client TLS configuration, nil when TLS is off. It reads
// and parses every file, so a missing file, a file without a certificate
// or a key that does not match its certificate is an error naming the
// flag (prefix is the flags' prefix, "kafka"). It reads the files again at
// every call: callers load once per connection pool, so renewed
// certificates are picked up by new pools.
func (c Config) Load(prefix string) (*tls.Config, error) {
	if !c.On() {
		return nil, nil
	}
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, // an explicit flag, documented as testing only
	}
	var errs []error
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s-tls-ca-file: %w", prefix, err))
		default:
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				errs = append(errs, fmt.Errorf("%s-tls-ca-file: %s holds no PEM certificate", prefix, c.CAFile))
			}
			cfg.RootCAs = pool
		}
	}
	switch {
	case c.CertFile != "" && c.KeyFile != "":
		pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s-tls-cert-file, %s-tls-key-file: %w", prefix, prefix, err))
		}
		cfg.Certificates = []tls.Certificate{pair}
	case c.CertFile != "":
		errs = append(errs, fmt.Errorf("%s-tls-cert-file: given without -%s-tls-key-file", prefix, prefix))
	case c.KeyFile != "":
		errs = append(errs, fmt.Errorf("%s-tls-key-file: given without -%s-tls-cert-file", prefix, prefix))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return cfg, nil
}

// ReadSecret returns the content of a secret file without its trailing
// line break (an editor's or `echo`'s), so that the file can hold the
// secret as typed. An empty secret is an error: a mounted secret that is
// empty is a deployment mistake, not a password. flagName names the flag
// in errors; the secret itself never appears in one.
func ReadSecret(flagName, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flagName, err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", flagName, path)
	}
	return s, nil
}
