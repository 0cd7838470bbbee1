package chstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/tlsfiles"
	"github.com/trawl-crawler/trawl/testkit/certtest"
)

// TestTLS runs a private server (chlocal) whose native TLS port requires
// a client certificate signed by a generated CA, with a user whose
// password is read from a file, and checks that the store connects
// through TLS with the right CA, client certificate and password, and
// that an untrusted server certificate, a missing client certificate and
// a wrong password are each refused at once with an error that says so.
// It runs on Debian's 18.16 and on current releases alike (the TLS block
// of chlocal's config is what both read).
func TestTLS(t *testing.T) {
	if _, err := chlocal.FindBinary(); err != nil {
		t.Fatalf("this test starts its own ClickHouse server with a TLS port: %v", err)
	}
	pki := certtest.New(t, "clickhouse")
	const password = "s3cret with spaces"
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv, err := chlocal.StartWith(ctx, t.TempDir(), chlocal.Options{
		TLS:   &chlocal.TLS{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile},
		Users: map[string]string{"trawl": password},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })

	good := chstore.Config{
		Addr:         []string{srv.TLSAddr()},
		Database:     "tls_test",
		Username:     "trawl",
		PasswordFile: pki.WriteSecret(t, "ch-password", password),
		DialTimeout:  5 * time.Second,
		TLS:          tlsfiles.Config{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey},
	}
	store, err := chstore.Open(ctx, good, nil)
	if err != nil {
		t.Fatalf("open over TLS: %v\nserver log: %s", err, srv.Dir())
	}
	var one uint8
	if err := store.Conn().QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("query over TLS: %d, %v", one, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	stranger := certtest.New(t, "stranger")
	tests := []struct {
		name   string
		modify func(*chstore.Config)
		want   string // in the error
	}{
		{"untrusted server certificate", func(c *chstore.Config) { c.TLS.CAFile = stranger.CAFile }, "certificate signed by unknown authority"},
		{"server name not in the certificate", func(c *chstore.Config) { c.TLS.ServerName = "db.example" }, "not db.example"},
		// TLS 1.3 reports the server's refusal at the client's first read
		// or write after the handshake: the alert ("certificate
		// required") or, when the write comes first, a reset.
		{"no client certificate", func(c *chstore.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" }, ""},
		{"plain text to the TLS port", func(c *chstore.Config) { c.TLS = tlsfiles.Config{} }, ""},
		{"wrong password", func(c *chstore.Config) {
			c.PasswordFile = pki.WriteSecret(t, "wrong", "hunter2")
		}, "password"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.modify(&c)
			start := time.Now()
			s, err := chstore.Open(ctx, c, nil)
			took := time.Since(start)
			if err == nil {
				_ = s.Close()
				t.Fatal("connected, want a refusal")
			}
			t.Logf("after %v: %v", took, err)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error shows the password: %v", err)
			}
			if took > 10*time.Second {
				t.Errorf("refused after %v, want at once", took)
			}
		})
	}
}

// TestSecurityConfig: a password file, a password and the TLS files are
// checked by Validate, errors naming the flag and never the password.
func TestSecurityConfig(t *testing.T) {
	pki := certtest.New(t, "clickhouse")
	password := pki.WriteSecret(t, "pw", "p@ss")
	empty := pki.WriteSecret(t, "empty", "")
	tests := []struct {
		name   string
		modify func(*chstore.Config)
		want   string // "" for none
	}{
		{"password file", func(c *chstore.Config) { c.PasswordFile = password }, ""},
		{"tls", func(c *chstore.Config) {
			c.TLS = tlsfiles.Config{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}
		}, ""},
		{"both passwords", func(c *chstore.Config) { c.Password, c.PasswordFile = "p@ss", password }, "give one, not both"},
		{"missing password file", func(c *chstore.Config) { c.PasswordFile = pki.Dir + "/nope" }, "clickhouse-password-file: open"},
		{"empty password file", func(c *chstore.Config) { c.PasswordFile = empty }, "is empty"},
		{"missing ca file", func(c *chstore.Config) { c.TLS.CAFile = pki.Dir + "/nope" }, "clickhouse-tls-ca-file: open"},
		{"key without cert", func(c *chstore.Config) { c.TLS.KeyFile = pki.ClientKey }, "clickhouse-tls-key-file: given without"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := chstore.Config{Addr: []string{"127.0.0.1:9440"}, Database: "d", Username: "u", DialTimeout: time.Second}
			tt.modify(&c)
			err := c.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			case err != nil && strings.Contains(err.Error(), "p@ss"):
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}
