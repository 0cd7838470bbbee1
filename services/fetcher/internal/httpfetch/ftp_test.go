package httpfetch

import (
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/testkit/ftptest"
)

// TestFetchFTP fetches files and directory listings from a real FTP server
// (passive mode): files come back typed and capped, directories as HTML
// pages of absolute links, a missing path as 404, and a private FTP
// server is refused unless allowed.
func TestFetchFTP(t *testing.T) {
	srv := ftptest.Start(t, "127.0.0.40", ftptest.Options{Files: map[string]string{
		"/pub/readme.txt":       "hello over ftp",
		"/pub/page.html":        "<html><body><a href=\"readme.txt\">r</a></body></html>",
		"/pub/big.txt":          strings.Repeat("x", 5000),
		"/pub/sub dir/deep.bin": "\x00\x01\x02binary",
	}})
	f := New(Options{AllowPrivate: true, MaxBodyBytes: 4096})
	defer f.Close()
	base := srv.URL()
	tests := []struct {
		path      string
		status    int
		kind      failure.Kind
		ctype     string
		body      []string // substrings of the body
		truncated bool
	}{
		{path: "/pub/readme.txt", status: 200, ctype: "text/plain", body: []string{"hello over ftp"}},
		{path: "/pub/page.html", status: 200, ctype: "text/html", body: []string{`href="readme.txt"`}},
		{path: "/pub/big.txt", status: 200, kind: failure.BodyTooLarge, ctype: "text/plain", truncated: true},
		{path: "/pub/", status: 200, ctype: "text/html", body: []string{
			`href="` + base + `/pub/readme.txt"`, `href="` + base + `/pub/sub%20dir/"`, `href="` + base + `/pub/big.txt"`}},
		{path: "/pub", status: 200, ctype: "text/html", body: []string{`href="` + base + `/pub/page.html"`}},
		{path: "/pub/sub%20dir/", status: 200, ctype: "text/html", body: []string{`href="` + base + `/pub/sub%20dir/deep.bin"`}},
		{path: "/missing.txt", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := f.Fetch(t.Context(), Request{URL: base + tt.path})
			if res.Status != tt.status || res.Kind != tt.kind {
				t.Fatalf("status %d kind %q (%v), want %d %q", res.Status, res.Kind, res.Err, tt.status, tt.kind)
			}
			if tt.ctype != "" && res.ContentType != tt.ctype {
				t.Errorf("content type %q, want %q", res.ContentType, tt.ctype)
			}
			for _, want := range tt.body {
				if !strings.Contains(string(res.Body), want) {
					t.Errorf("body %q does not contain %q", res.Body, want)
				}
			}
			if res.Truncated != tt.truncated || res.BodyBytes > 4096 {
				t.Errorf("truncated %v with %d bytes, want truncated %v within the cap", res.Truncated, res.BodyBytes, tt.truncated)
			}
		})
	}
	refused := New(Options{})
	defer refused.Close()
	if res := refused.Fetch(t.Context(), Request{URL: base + "/pub/readme.txt"}); res.Kind != failure.RefusedAddress {
		t.Errorf("private ftp server: kind %q (%v), want refused_address", res.Kind, res.Err)
	}
}
