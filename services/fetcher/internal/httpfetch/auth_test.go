package httpfetch

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestFetchCredentialsAndCookies: per-site basic auth goes only to its
// site (over plain http only when allowed), and with cookies enabled a
// cookie a site sets comes back to it and to no other site.
func TestFetchCredentialsAndCookies(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		switch r.URL.Path {
		case "/set":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "abc", Path: "/"})
		case "/private":
			if u, p, ok := r.BasicAuth(); !ok || u != "crawler" || p != "pw" {
				w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
		}
		c, _ := r.Cookie("session")
		_, auth := r.Header["Authorization"]
		fmt.Fprintf(w, "cookie=%v auth=%v", c != nil, auth)
	})
	a := serve(t, "127.0.0.34", handler)
	b := serve(t, "127.0.0.35", handler)
	strict := serve(t, "127.0.0.36", handler)
	host := func(base string) string { return strings.TrimPrefix(base, "http://") }
	f := New(Options{AllowPrivate: true, Cookies: true, Credentials: map[string]Credential{
		host(a):      {Username: "crawler", Password: "pw", AllowHTTP: true},
		host(strict): {Username: "crawler", Password: "pw"}, // https only
	}})
	defer f.Close()
	tests := []struct {
		url    string
		status int
		body   string
	}{
		{a + "/private", 200, "cookie=false auth=true"},
		{strict + "/private", 401, ""},
		{b + "/private", 401, ""},
		{b + "/set", 200, "cookie=false auth=false"},
		{b + "/check", 200, "cookie=true auth=false"},
		{a + "/check", 200, "cookie=false auth=true"},
	}
	for _, tt := range tests {
		res := f.Fetch(t.Context(), Request{URL: tt.url})
		if res.Status != tt.status || (tt.body != "" && string(res.Body) != tt.body) {
			t.Errorf("%s: %d %q, want %d %q", tt.url, res.Status, res.Body, tt.status, tt.body)
		}
	}
	plain := New(Options{AllowPrivate: true})
	defer plain.Close()
	_ = plain.Fetch(t.Context(), Request{URL: b + "/set"})
	if res := plain.Fetch(t.Context(), Request{URL: b + "/check"}); string(res.Body) != "cookie=false auth=false" {
		t.Errorf("without cookies enabled: %q, want no cookie sent", res.Body)
	}
}

func TestReadCredentials(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int
		wantErr bool
	}{
		{"valid", `{"Example.com": {"username": "u", "password": "hunter2"}, "b.org:8443": {"username": "v", "password": "x", "allow_http": true}}`, 2, false},
		{"syntax", `{"a.com": {"username": "u", "password": "hunter2"`, 0, true},
		{"no username", `{"a.com": {"password": "hunter2"}}`, 0, true},
		{"unknown field", `{"a.com": {"username": "u", "passwd": "hunter2"}}`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadCredentials(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr || len(got) != tt.want {
				t.Fatalf("ReadCredentials = %d entries, %v; want %d, error %v", len(got), err, tt.want, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error quotes the password: %v", err)
			}
			if tt.name == "valid" && got["example.com"].Password != "hunter2" {
				t.Errorf("host keys are not lower-cased: %v", got)
			}
		})
	}
}
