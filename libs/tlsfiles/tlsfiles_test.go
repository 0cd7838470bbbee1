package tlsfiles_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/tlsfiles"
	"github.com/trawl-crawler/trawl/testkit/certtest"
)

// TestReadSecret: a trailing line break is not part of the secret, other
// whitespace is; an empty or missing file is an error naming the flag.
func TestReadSecret(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content, want, err string
	}{
		{"plain", "s3cret", "s3cret", ""},
		{"newline", "s3cret\n", "s3cret", ""},
		{"crlf", "s3cret\r\n", "s3cret", ""},
		{"inner spaces kept", " two words \n", " two words ", ""},
		{"empty", "\n", "", "pw-file: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := tlsfiles.ReadSecret("pw-file", path)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("error %v, want one starting %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("%q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := tlsfiles.ReadSecret("pw-file", filepath.Join(dir, "missing")); err == nil || !strings.HasPrefix(err.Error(), "pw-file: open") {
		t.Fatalf("missing file: %v", err)
	}
}

// TestLoad: off without settings; a CA file alone turns TLS on and
// trusts only that CA; a client pair is loaded.
func TestLoad(t *testing.T) {
	pki := certtest.New(t, "t")
	if c, err := (tlsfiles.Config{}).Load("x"); c != nil || err != nil {
		t.Fatalf("no settings: %v, %v; want nil, nil", c, err)
	}
	c, err := tlsfiles.Config{CAFile: pki.CAFile, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "db"}.Load("x")
	if err != nil {
		t.Fatal(err)
	}
	if c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "db" || c.InsecureSkipVerify {
		t.Fatalf("config %+v", c)
	}
	if _, err := (tlsfiles.Config{Enabled: true}).Load("x"); err != nil {
		t.Fatalf("system roots: %v", err)
	}
}
