package proxylist

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseLine(t *testing.T) {
	tests := []struct {
		name   string
		line   string
		want   Entry
		ok     bool
		err    error
		id     string // want same id as this line, when set
		string string
	}{
		{name: "blank", line: "   "},
		{name: "comment", line: "  # 1.2.3.4:80"},
		{name: "host port", line: "127.0.0.1:3128", ok: true, want: Entry{Scheme: "http", Host: "127.0.0.1", Port: 3128}, string: "http://127.0.0.1:3128"},
		{name: "trailing comment", line: "127.0.0.1:3128 # office", ok: true, want: Entry{Scheme: "http", Host: "127.0.0.1", Port: 3128}},
		{name: "http url", line: "http://10.0.0.1:80", ok: true, want: Entry{Scheme: "http", Host: "10.0.0.1", Port: 80}, id: "10.0.0.1:80"},
		{name: "https upper case", line: "HTTPS://Proxy.Example.com:443/", ok: true, want: Entry{Scheme: "https", Host: "proxy.example.com", Port: 443}},
		{name: "socks5 ipv6", line: "socks5://[::1]:1080", ok: true, want: Entry{Scheme: "socks5", Host: "::1", Port: 1080}, string: "socks5://[::1]:1080"},
		{
			name: "credentials", line: "http://alice:s%3Acret@127.0.0.1:8080", ok: true,
			want: Entry{Scheme: "http", Host: "127.0.0.1", Port: 8080, Username: "alice", Password: "s:cret", HasUser: true},
			id:   "127.0.0.1:8080", string: "http://127.0.0.1:8080",
		},
		{name: "user without password", line: "socks5://bob@127.0.0.1:1080", ok: true, want: Entry{Scheme: "socks5", Host: "127.0.0.1", Port: 1080, Username: "bob", HasUser: true}},
		{name: "unsupported scheme", line: "ftp://127.0.0.1:21", err: ErrScheme},
		{name: "socks4", line: "socks4://127.0.0.1:1080", err: ErrScheme},
		{name: "missing port", line: "127.0.0.1", err: ErrPort},
		{name: "url missing port", line: "http://127.0.0.1", err: ErrPort},
		{name: "port zero", line: "127.0.0.1:0", err: ErrPort},
		{name: "port too big", line: "127.0.0.1:65536", err: ErrPort},
		{name: "port not numeric", line: "127.0.0.1:http", err: ErrPort},
		{name: "empty host", line: ":8080", err: ErrHost},
		{name: "bad host", line: "a/b:8080", err: ErrHost},
		{name: "path", line: "http://127.0.0.1:8080/x", err: ErrSyntax},
		{name: "query", line: "http://127.0.0.1:8080?x=1", err: ErrSyntax},
		{name: "garbage after", line: "127.0.0.1:8080 extra", err: ErrSyntax},
		{name: "userinfo without scheme", line: "u:p@127.0.0.1:8080", err: ErrSyntax},
		{name: "empty user", line: "http://:pw@127.0.0.1:8080", err: ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ParseLine(tt.line)
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if got != tt.want {
				t.Errorf("entry = %+v, want %+v", got, tt.want)
			}
			if tt.string != "" && got.String() != tt.string {
				t.Errorf("String() = %q, want %q", got.String(), tt.string)
			}
			if tt.id != "" {
				other, _, _ := ParseLine(tt.id)
				if got.ID() != other.ID() {
					t.Errorf("ID() = %q, want %q (same scheme, host, port)", got.ID(), other.ID())
				}
			}
		})
	}
}

func TestIDDistinguishesSchemeHostPort(t *testing.T) {
	lines := []string{"http://127.0.0.1:80", "https://127.0.0.1:80", "socks5://127.0.0.1:80", "127.0.0.2:80", "127.0.0.1:81"}
	seen := map[string]string{}
	for _, l := range lines {
		e, _, err := ParseLine(l)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[e.ID()]; dup {
			t.Errorf("%s and %s share id %s", prev, l, e.ID())
		}
		seen[e.ID()] = l
	}
}

func TestParseFile(t *testing.T) {
	f, err := os.Open("testdata/proxies.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := Parse(f)
	var got []string
	for _, e := range entries {
		got = append(got, e.URL())
	}
	want := []string{
		"http://127.0.0.10:3128",
		"http://user:p%40ss@127.0.0.11:8080",
		"https://proxy.example.com:443",
		"socks5://[::1]:1080",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("entries = %v, want %v", got, want)
	}
	var lines []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var le *LineError
		if !errors.As(e, &le) {
			t.Fatalf("error %v is not a LineError", e)
		}
		lines = append(lines, le.Line)
	}
	if want := []int{7, 8, 10}; len(lines) != len(want) || lines[0] != 7 || lines[1] != 8 || lines[2] != 10 {
		t.Errorf("invalid lines = %v, want %v", lines, want)
	}
	if strings.Contains(err.Error(), "p%40ss") || strings.Contains(err.Error(), "p@ss") {
		t.Errorf("error leaks a password: %v", err)
	}
}

func TestParseErrorNeverQuotesLine(t *testing.T) {
	_, err := Parse(strings.NewReader("http://user:hunter2@127.0.0.1:99999\nhttp://user:hunter2@127.0.0.1:80/%zz\n"))
	if err == nil {
		t.Fatal("want errors")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error leaks the password: %v", err)
	}
}

// FuzzParseLine checks, for any line: ParseLine never panics; an error is a
// static sentinel (so it never quotes a password); a parsed entry round-trips through URL() to itself,
// String() is scheme://host:port, and ID() is 16 hex digits independent of
// credentials.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		"127.0.0.1:3128", "http://u:p@127.0.0.1:8080", "socks5://[::1]:1080", "https://h.example:443/",
		"# c", "", "ftp://x:1", "http://u:p@h:0", "h:65535 # x", "http://[fe80::1%25eth0]:80",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		e, ok, err := ParseLine(line)
		if err != nil {
			if ok {
				t.Fatal("ok with error")
			}
			switch err {
			// Identity on purpose: the error must be the sentinel itself, not a wrap.
			case ErrScheme, ErrPort, ErrHost, ErrSyntax: //nolint:errorlint // static: cannot quote the line
			default:
				t.Fatalf("error %q is not a static sentinel", err)
			}
			return
		}
		if !ok {
			return
		}
		again, ok2, err2 := ParseLine(e.URL())
		if err2 != nil || !ok2 || again != e {
			t.Fatalf("round trip of %q via %q: %+v, %v, %v", line, e.URL(), again, ok2, err2)
		}
		if e.String() != e.Scheme+"://"+e.Addr() {
			t.Fatalf("String() = %q", e.String())
		}
		bare := e
		bare.Username, bare.Password, bare.HasUser = "", "", false
		if e.ID() != bare.ID() || len(e.ID()) != 16 {
			t.Fatalf("ID depends on credentials or has a bad length: %q vs %q", e.ID(), bare.ID())
		}
	})
}
