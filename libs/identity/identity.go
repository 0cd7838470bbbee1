// Package identity holds the rules of a crawl's identity on the wire: the
// User-Agent it announces (a robots.txt product token and a contact) and
// the extra request headers it may send (crawlv1.Identity). The seeder
// validates a crawl request with it, field by field; the fetcher filters
// with it what a specification asks it to send, so a header this package
// refuses never reaches a site whoever published the specification.
//
// It is pure: no I/O, no dependency beyond the standard library.
package identity

import (
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"strings"
)

// Bounds of an identity.
const (
	MaxUserAgent   = 256  // bytes of a User-Agent
	MaxHeaders     = 20   // extra headers of a crawl
	MaxHeaderName  = 64   // bytes of a header name
	MaxHeaderValue = 1024 // bytes of a header value
)

// Example is the form of a user agent the errors suggest.
const Example = "examplebot/1.0 (+https://example.org/bot)"

// ProductToken returns the robots.txt product token of a User-Agent: its
// leading run of letters, '-' and '_' ("examplebot/1.0 (+…)" →
// "examplebot"), the characters RFC 9309 §2.2.1 allows in one. robots.txt
// groups are matched on it (the fetcher's robots.ProductToken is the same
// rule).
func ProductToken(ua string) string {
	i := 0
	for i < len(ua) && isTokenLetter(ua[i]) {
		i++
	}
	return ua[:i]
}

func isTokenLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_'
}

// CheckUserAgent reports what keeps ua from being a crawl's User-Agent, or
// nil. The rule, as the crawlers that site owners can tell apart write
// theirs ("Googlebot/2.1 (+http://www.google.com/bot.html)", "bingbot/2.0
// (+http://www.bing.com/bingbot.htm)", the fetcher's own "trawl/0.1
// (+https://github.com/trawl-crawler/trawl)"):
//
//   - printable ASCII (no control character, tab or non-ASCII byte), at
//     most MaxUserAgent bytes, no space around it;
//   - it starts with the crawler's product, "name" or "name/version": the
//     name is the product token robots.txt groups are matched on, so it may
//     hold only letters, '-' and '_' (RFC 9309 §2.2.1), and may not be
//     "Mozilla" (a browser-like "Mozilla/5.0 (compatible; examplebot…)"
//     would be matched against the groups of "Mozilla", not its own);
//   - a comment in parentheses holds a contact: an http(s) URL (a leading
//     '+' is the custom), "mailto:" and an address, or an email address.
//     Site owners who see the crawl in their logs can then reach whoever
//     runs it.
func CheckUserAgent(ua string) error {
	if ua == "" {
		return errors.New("empty")
	}
	if len(ua) > MaxUserAgent {
		return fmt.Errorf("%d bytes, want at most %d", len(ua), MaxUserAgent)
	}
	for i := 0; i < len(ua); i++ {
		if c := ua[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("byte %d is %q: want printable ASCII (no control characters, tabs or non-ASCII)", i, c)
		}
	}
	if ua != strings.TrimSpace(ua) {
		return errors.New("space around it: remove it")
	}
	product, _, _ := strings.Cut(ua, " ")
	name, version, hasVersion := strings.Cut(product, "/")
	switch tok := ProductToken(name); {
	case name == "" || strings.HasPrefix(name, "("):
		return fmt.Errorf("no product token: start with your crawler's name, e.g. %q (robots.txt groups are matched on it)", Example)
	case tok != name:
		return fmt.Errorf("product token %q: want letters, '-' and '_' only (RFC 9309: robots.txt groups are matched on it), e.g. %q", name, Example)
	case strings.EqualFold(tok, "Mozilla"):
		return fmt.Errorf("product token %q names browsers: robots.txt groups would be matched on it, not on your crawler; start with your crawler's name, e.g. %q", tok, Example)
	case hasVersion && !isToken(version):
		return fmt.Errorf("product version %q: want a token such as 1.0 after the '/'", version)
	}
	comments, err := comments(ua)
	if err != nil {
		return err
	}
	for _, c := range comments {
		if hasContact(c) {
			return nil
		}
	}
	return fmt.Errorf("no contact: add a URL or an email in parentheses, e.g. %q, so that site owners can reach whoever runs the crawl", Example)
}

// comments returns the text of the parenthesized comments of ua (nested
// ones inside their outer comment), or an error when the parentheses do
// not balance.
func comments(ua string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(ua); i++ {
		switch ua[i] {
		case '(':
			if depth == 0 {
				start = i + 1
			}
			depth++
		case ')':
			if depth == 0 {
				return nil, errors.New("unbalanced parentheses: a ')' closes nothing")
			}
			if depth--; depth == 0 {
				out = append(out, ua[start:i])
			}
		}
	}
	if depth != 0 {
		return nil, errors.New("unbalanced parentheses: a '(' is not closed")
	}
	return out, nil
}

// hasContact reports whether a comment names a contact: one of its
// parts (split at ';', ',' and spaces) is an http(s) URL with a host
// ("+https://…" or without the '+'), "mailto:" and an address, or an
// email address.
func hasContact(comment string) bool {
	parts := strings.FieldsFunc(comment, func(r rune) bool { return r == ';' || r == ',' || r == ' ' || r == '(' || r == ')' })
	for _, p := range parts {
		p = strings.TrimPrefix(p, "+")
		if addr, ok := strings.CutPrefix(strings.ToLower(p), "mailto:"); ok {
			return isEmail(addr)
		}
		if isEmail(p) {
			return true
		}
		if u, err := url.Parse(p); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			return true
		}
	}
	return false
}

// isEmail reports whether s looks like an email address: one '@' between
// a local part and a domain with a dot inside.
func isEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || strings.ContainsAny(domain, "@/:") {
		return false
	}
	dot := strings.IndexByte(domain, '.')
	return dot > 0 && dot < len(domain)-1
}

// Header is one extra request header, its name in canonical form.
type Header struct {
	Name, Value string
}

// String is the header as "Name: value".
func (h Header) String() string { return h.Name + ": " + h.Value }

// ParseHeader checks "Name: value" (the form of the API's headers, the
// launcher's --header and the console's lines) with CheckHeader.
func ParseHeader(s string) (Header, error) {
	name, value, ok := strings.Cut(s, ":")
	if !ok {
		return Header{}, fmt.Errorf("%q: want \"Name: value\"", s)
	}
	return CheckHeader(name, value)
}

// CheckHeader returns the header a crawl asks to send, its name canonical
// and its value without surrounding blanks, or why it may not be sent: a
// name that is no RFC 9110 token, a value with a line break or another
// control character (a header injected into the request) or non-ASCII,
// either too long, or a header a crawl may not set (Refused).
func CheckHeader(name, value string) (Header, error) {
	name = strings.TrimSpace(name)
	value = strings.Trim(value, " \t")
	switch {
	case name == "":
		return Header{}, errors.New("empty header name")
	case len(name) > MaxHeaderName:
		return Header{}, fmt.Errorf("header name of %d bytes, want at most %d", len(name), MaxHeaderName)
	case !isToken(name):
		return Header{}, fmt.Errorf("header name %q: want a token (letters, digits and !#$%%&'*+-.^_`|~, RFC 9110 §5.1)", name)
	}
	canon := textproto.CanonicalMIMEHeaderKey(name)
	if why := Refused(canon); why != "" {
		return Header{}, fmt.Errorf("header %s may not be set: %s", canon, why)
	}
	if len(value) > MaxHeaderValue {
		return Header{}, fmt.Errorf("header %s: value of %d bytes, want at most %d", canon, len(value), MaxHeaderValue)
	}
	for i := 0; i < len(value); i++ {
		switch c := value[i]; {
		case c == '\r' || c == '\n':
			return Header{}, fmt.Errorf("header %s: a line break in the value (it would inject headers)", canon)
		case c != '\t' && (c < 0x20 || c > 0x7e):
			return Header{}, fmt.Errorf("header %s: byte %d of the value is %q, want printable ASCII", canon, i, c)
		}
	}
	return Header{Name: canon, Value: value}, nil
}

// refused are the headers a crawl may not set (canonical names), and why.
var refused = map[string]string{
	// hop-by-hop (RFC 9110 §7.6.1, RFC 9112): they belong to one
	// connection, which the fetcher manages
	"Connection":          "a hop-by-hop header: the fetcher manages its connections",
	"Keep-Alive":          "a hop-by-hop header: the fetcher manages its connections",
	"Proxy-Authenticate":  "a hop-by-hop header: it belongs to a proxy's answer",
	"Proxy-Authorization": "a hop-by-hop header: proxy credentials come from the proxy pool",
	"Proxy-Connection":    "a hop-by-hop header: the fetcher manages its connections",
	"Te":                  "a hop-by-hop header: the fetcher manages its connections",
	"Trailer":             "a hop-by-hop header: the fetcher's requests have no body",
	"Transfer-Encoding":   "a hop-by-hop header: the fetcher's requests have no body",
	"Upgrade":             "a hop-by-hop header: the fetcher speaks HTTP/1.1 and HTTP/2 only",
	// the request's own framing and target
	"Host":           "it is the URL's host",
	"Content-Length": "the fetcher's requests have no body",
	"Expect":         "the fetcher's requests have no body",
	// state and credentials
	"Cookie":        "cookies are each site's own (the fetcher's --cookies keeps and returns them)",
	"Authorization": "credentials come from the fetcher's --credentials-file, never from a crawl's specification, which whoever may read the crawl sees",
	// what the fetcher sets itself
	"User-Agent":          "give it as the crawl's user agent (identity.user_agent)",
	"Accept-Encoding":     "the fetcher asks for the codings it decodes",
	"If-None-Match":       "the fetcher sets it to revalidate a page it holds (revisits)",
	"If-Modified-Since":   "the fetcher sets it to revalidate a page it holds (revisits)",
	"If-Match":            "a conditional request would answer 412 instead of the page",
	"If-Unmodified-Since": "a conditional request would answer 412 instead of the page",
	"Range":               "a partial answer would be stored as the whole page",
	"If-Range":            "a partial answer would be stored as the whole page",
}

// Refused returns why a crawl may not set the header of this canonical
// name, or "" when it may.
func Refused(canonicalName string) string { return refused[canonicalName] }

// isToken reports whether s is an RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}
