package identity

import (
	"strings"
	"testing"
)

func TestCheckUserAgent(t *testing.T) {
	tests := []struct {
		name, ua string
		want     string // substring of the error; "" = valid
	}{
		{name: "the fetcher's default", ua: "trawl/0.1 (+https://github.com/trawl-crawler/trawl)"},
		{name: "URL without the plus", ua: "examplebot/1.0 (https://example.org/bot)"},
		{name: "several comment parts", ua: "examplebot/2 (compatible; +http://example.org/bot.html; ops@example.org)"},
		{name: "email", ua: "examplebot (ops@example.org)"},
		{name: "mailto", ua: "example_bot-x/1.0 (mailto:ops@example.org)"},
		{name: "product after the comment", ua: "examplebot/1.0 (+https://example.org/bot) Go-http-client/1.1"},
		{name: "empty", ua: "", want: "empty"},
		{name: "too long", ua: "examplebot/1.0 (+https://example.org/" + strings.Repeat("a", MaxUserAgent) + ")", want: "at most 256"},
		{name: "line break", ua: "examplebot/1.0 (+https://example.org/)\r\nX-Evil: 1", want: "printable ASCII"},
		{name: "tab", ua: "examplebot/1.0\t(+https://example.org/)", want: "printable ASCII"},
		{name: "non-ASCII", ua: "exämplebot/1.0 (+https://example.org/)", want: "printable ASCII"},
		{name: "space around", ua: " examplebot/1.0 (+https://example.org/)", want: "space around"},
		{name: "no product token", ua: "(+https://example.org/bot)", want: "no product token"},
		{name: "slash first", ua: "/1.0 (+https://example.org/bot)", want: "no product token"},
		{name: "digit in the token", ua: "bot2/1.0 (+https://example.org/bot)", want: `product token "bot2"`},
		{name: "dot in the token", ua: "example.bot (+https://example.org/bot)", want: `product token "example.bot"`},
		{name: "browser-like", ua: "Mozilla/5.0 (compatible; examplebot/1.0; +https://example.org/bot)", want: "names browsers"},
		{name: "bad version", ua: "examplebot/ (+https://example.org/bot)", want: "product version"},
		{name: "no contact", ua: "examplebot/1.0", want: "no contact"},
		{name: "comment without contact", ua: "examplebot/1.0 (compatible; Linux)", want: "no contact"},
		{name: "URL outside a comment", ua: "examplebot/1.0 +https://example.org/bot", want: "no contact"},
		{name: "not an http URL", ua: "examplebot/1.0 (+ftp://example.org/bot)", want: "no contact"},
		{name: "bare domain", ua: "examplebot/1.0 (example.org)", want: "no contact"},
		{name: "email without domain dot", ua: "examplebot/1.0 (ops@localhost)", want: "no contact"},
		{name: "unclosed comment", ua: "examplebot/1.0 (+https://example.org/bot", want: "not closed"},
		{name: "stray parenthesis", ua: "examplebot/1.0 ) (+https://example.org/bot)", want: "closes nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckUserAgent(tt.ua)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("CheckUserAgent(%q) = %v, want nil", tt.ua, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("CheckUserAgent(%q) = %v, want an error with %q", tt.ua, err, tt.want)
			}
		})
	}
}

func TestProductToken(t *testing.T) {
	for ua, want := range map[string]string{
		"examplebot/1.0 (+https://x)": "examplebot",
		"Googlebot":                   "Googlebot",
		"my_bot-2":                    "my_bot-",
		"":                            "",
	} {
		if got := ProductToken(ua); got != want {
			t.Errorf("ProductToken(%q) = %q, want %q", ua, got, want)
		}
	}
}

func TestParseHeader(t *testing.T) {
	tests := []struct {
		in   string
		want Header
		err  string // substring of the error; "" = valid
	}{
		{in: "Accept-Language: en, fr;q=0.8", want: Header{"Accept-Language", "en, fr;q=0.8"}},
		{in: "accept-language:en", want: Header{"Accept-Language", "en"}},
		{in: "  From :  ops@example.org \t", want: Header{"From", "ops@example.org"}},
		{in: "X-Empty:", want: Header{"X-Empty", ""}},
		{in: "Accept: text/html", want: Header{"Accept", "text/html"}},
		{in: "X-Trace: a:b:c", want: Header{"X-Trace", "a:b:c"}},
		{in: "No colon", err: `want "Name: value"`},
		{in: ": value", err: "empty header name"},
		{in: "Bad Name: x", err: "want a token"},
		{in: "Bad(Name): x", err: "want a token"},
		{in: strings.Repeat("X", MaxHeaderName+1) + ": x", err: "at most 64"},
		{in: "X-Long: " + strings.Repeat("v", MaxHeaderValue+1), err: "at most 1024"},
		{in: "X-Inject: a\r\nHost: evil", err: "line break"},
		{in: "X-Inject: a\nb", err: "line break"},
		{in: "X-Nul: a\x00b", err: "printable ASCII"},
		{in: "X-Utf8: é", err: "printable ASCII"},
		{in: "Connection: close", err: "header Connection may not be set: a hop-by-hop header"},
		{in: "keep-alive: 5", err: "header Keep-Alive may not be set: a hop-by-hop header"},
		{in: "Proxy-Authenticate: x", err: "header Proxy-Authenticate may not be set"},
		{in: "Proxy-Authorization: x", err: "header Proxy-Authorization may not be set"},
		{in: "TE: trailers", err: "header Te may not be set: a hop-by-hop header"},
		{in: "Trailer: x", err: "header Trailer may not be set"},
		{in: "Transfer-Encoding: chunked", err: "header Transfer-Encoding may not be set"},
		{in: "Upgrade: h2c", err: "header Upgrade may not be set"},
		{in: "Host: example.org", err: "header Host may not be set"},
		{in: "Cookie: a=b", err: "header Cookie may not be set"},
		{in: "User-Agent: x", err: "identity.user_agent"},
		{in: "Accept-Encoding: gzip", err: "header Accept-Encoding may not be set"},
		{in: "If-None-Match: \"x\"", err: "header If-None-Match may not be set"},
		{in: "If-Modified-Since: x", err: "header If-Modified-Since may not be set"},
		{in: "Authorization: Bearer x", err: "--credentials-file"},
		{in: "Range: bytes=0-1", err: "header Range may not be set"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseHeader(tt.in)
			switch {
			case tt.err == "" && (err != nil || got != tt.want):
				t.Fatalf("ParseHeader(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("ParseHeader(%q) = %+v, %v, want an error with %q", tt.in, got, err, tt.err)
			}
		})
	}
}

// FuzzCheckHeader: whatever a crawl's specification holds, a header
// CheckHeader lets through can be written into a request as is: its name
// a token, its value without a line break or control byte, and never one
// of the refused headers.
func FuzzCheckHeader(f *testing.F) {
	f.Add("X-A", "b")
	f.Add("host", "x")
	f.Add("X-A", "a\r\nHost: y")
	f.Fuzz(func(t *testing.T, name, value string) {
		h, err := CheckHeader(name, value)
		if err != nil {
			return
		}
		if !isToken(h.Name) || Refused(h.Name) != "" || strings.ContainsAny(h.Value, "\r\n\x00") {
			t.Fatalf("CheckHeader(%q, %q) let %+v through", name, value, h)
		}
	})
}

// FuzzCheckUserAgent: CheckUserAgent never panics, and a user agent it
// accepts can be sent as a header and names its product token first.
func FuzzCheckUserAgent(f *testing.F) {
	f.Add("trawl/0.1 (+https://github.com/trawl-crawler/trawl)")
	f.Add("examplebot ((ops@example.org))")
	f.Add("x (")
	f.Fuzz(func(t *testing.T, ua string) {
		if CheckUserAgent(ua) != nil {
			return
		}
		if ProductToken(ua) == "" || strings.ContainsAny(ua, "\r\n\x00") || len(ua) > MaxUserAgent {
			t.Fatalf("CheckUserAgent accepted %q", ua)
		}
	})
}
