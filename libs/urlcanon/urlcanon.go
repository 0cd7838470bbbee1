// Package urlcanon parses, resolves and canonicalizes URLs the way browsers
// do (WHATWG URL standard, via github.com/nlnwa/whatwg-url), derives the
// politeness key that partitions every URL topic, and the dedup key under
// which the crawl fetches a resource once.
//
// Every service uses this one package; there is no second canonicalizer.
// Inputs spelled plainly enough that the parser would only concatenate
// them, less the segments "." and ".." remove (an already canonical
// http(s) URL; "/a/b?x=1", "?x", "b.html", "../c/./d", "HTTPS://host/p"
// against a canonical base), skip the parser: the result is the same
// string, by the argument in fast.go, checked against the parser by
// FuzzResolveFast and FuzzPolitenessKeyFast.
//
// # The canonical form: what the crawler requests
//
// Canonicalize returns the URL the fetcher requests. It applies only
// normalizations under which no server can tell the difference (RFC 3986
// §6.2.2 and §6.2.3, plus what every browser does before sending a
// request). The WHATWG serialization already lower-cases the scheme and host,
// IDNA-encodes the host, normalizes IPv4 and IPv6 addresses (0x7f.1 is
// 127.0.0.1), drops the scheme's default port, resolves dot segments (also
// percent-encoded ones), turns an empty path into "/" and percent-encodes
// what must be encoded; then:
//
//   - the fragment is removed: it is never sent to the server;
//   - trailing dots of a domain are removed ("example.com." is the host
//     "example.com", as in the politeness key; DNS resolves both the same and
//     virtual hosts are configured without the dot), except where the host
//     would then end in a number, which the parser reads as an IPv4
//     address ("0.." stays: "0" is 0.0.0.0);
//   - percent-escapes are normalized (RFC 3986 §6.2.2.1-2): hex digits
//     upper-cased, escapes of unreserved characters (ALPHA DIGIT - . _ ~)
//     decoded, a '%' that does not start a valid escape encoded as "%25" (so
//     the decoding can never create a new escape: the form is idempotent);
//   - every byte RFC 3986 does not allow in a path or query (^ | [ ] \ ` { }
//     and controls; WHATWG leaves some of them raw) is percent-encoded, so the
//     canonical string is a valid URI and the bytes Go's HTTP client sends
//     are exactly the canonical path and query: /a^b and /a%5Eb are one
//     request, and one URL.
//
// Nothing else changes: the query keeps its order, its empty parameters and
// its "+" (servers may care), the path keeps its case and its trailing slash,
// user information is kept.
//
// # The dedup key: what counts as one resource
//
// Key maps a canonical URL to the string whose fingerprint
// (libs/fingerprint.URL) identifies the resource in the seen set. It adds
// the rules that the reference crawlers apply to decide "already seen"
// without changing what is requested (Heritrix's default canonicalization
// rules, Scrapy/w3lib's canonicalize_url, StormCrawler's and Nutch's basic
// URL normalizers); see Key for the list and the reasons.
package urlcanon

import (
	"errors"
	"fmt"
	"net"
	"strings"

	whatwgerrors "github.com/nlnwa/whatwg-url/errors"
	"github.com/nlnwa/whatwg-url/url"
)

// Errors returned for URLs the crawler refuses.
var (
	// ErrInvalid: the string is not a parseable absolute URL.
	ErrInvalid = errors.New("invalid url")
	// ErrScheme: the scheme is not http, https or ftp.
	ErrScheme = errors.New("unsupported scheme")
	// ErrTooLong: longer than MaxLength after canonicalization.
	ErrTooLong = errors.New("url too long")
)

// MaxLength is the longest canonical URL accepted.
const MaxLength = 4096

// maxInput bounds the work spent on one input: a longer raw string is
// refused with ErrTooLong before parsing. Canonicalization can shrink a URL
// (fragment, dot segments, decoded escapes), hence the slack over MaxLength.
const maxInput = 8 * MaxLength

// Canonicalize returns the canonical form of an absolute URL: scheme and host
// lower-cased, host IDNA (punycode) encoded, default port removed, dot
// segments resolved, percent-encoding normalized, fragment removed, empty path
// becomes "/". Canonicalize(Canonicalize(x)) == Canonicalize(x).
// Only http, https and ftp URLs are accepted.
func Canonicalize(raw string) (string, error) {
	if len(raw) > maxInput {
		return "", fmt.Errorf("canonicalize url: %d bytes: %w", len(raw), ErrTooLong)
	}
	if canonicalFast(raw) {
		return raw, nil // the scheduler's common case: already canonical
	}
	return canonicalizeSlow(raw)
}

// canonicalizeSlow is Canonicalize by the WHATWG parser, whatever the
// spelling of raw (at most maxInput bytes).
func canonicalizeSlow(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", invalid("canonicalize url", err)
	}
	return finish(u)
}

// Resolve resolves ref against base as a browser resolves an href (tabs and
// newlines stripped, surrounding spaces trimmed, backslashes as slashes in
// special schemes, "http:foo", "//host", …) and returns the canonical result.
// To resolve many references against one base, use NewResolver.
func Resolve(base, ref string) (string, error) {
	r, err := NewResolver(base)
	if err != nil {
		return "", err
	}
	return r.Resolve(ref)
}

// Resolver resolves references against one base URL, parsed once (the
// parser uses one per page). It is not safe for concurrent use: the base is
// parsed lazily, and the underlying parser initializes parts of it lazily.
type Resolver struct {
	href  string        // the base's WHATWG serialization without fragment
	base  *url.Url      // href parsed; nil until a reference needs the parser
	parts baseParts     // of href; valid when partsOK
	cache *ResolveCache // nil: none

	partsOK bool
	fast    bool // references may take the fast path (see fast.go)
}

// WithCache makes r look up and remember its resolutions in c (shared by
// the resolvers of many pages; nil turns it off) and returns r.
func (r *Resolver) WithCache(c *ResolveCache) *Resolver {
	r.cache = nil
	if c != nil && r.partsOK {
		r.cache = c
	}
	return r
}

// NewResolver parses base for Resolve calls. A plainly canonical base (see
// canonicalFast) is its own serialization and is parsed only if a
// reference needs the parser.
func NewResolver(base string) (*Resolver, error) {
	if len(base) > maxInput {
		return nil, fmt.Errorf("resolve url: base of %d bytes: %w", len(base), ErrTooLong)
	}
	r := &Resolver{href: base}
	plain := canonicalFast(base)
	if !plain {
		b, err := url.Parse(base)
		if err != nil {
			return nil, invalid("resolve url: parse base", err)
		}
		r.base, r.href = b, b.Href(true)
	}
	r.parts, r.partsOK = partsOf(r.href)
	r.fast = r.partsOK && (plain || fastBase(r.href, r.parts))
	return r, nil
}

// Resolve is the package-level Resolve against r's base (looked up in
// and remembered by r's cache, if it has one, unless the fast path answers:
// it takes no lock, never misses and leaves the cache's room to what needs
// the parser).
func (r *Resolver) Resolve(ref string) (string, error) {
	if s, ok := r.resolveFast(ref); ok {
		return s, nil
	}
	if r.cache == nil {
		return r.resolveSlow(ref)
	}
	k, ok := r.parts.key(ref)
	if !ok {
		return r.resolveSlow(ref)
	}
	if res, hit := r.cache.get(k); hit {
		return res.url, res.err
	}
	u, err := r.resolveSlow(ref)
	r.cache.put(k, resolved{u, err})
	return u, err
}

// resolveSlow resolves ref with the WHATWG parser, whatever its spelling.
func (r *Resolver) resolveSlow(ref string) (string, error) {
	if len(ref) > maxInput {
		return "", fmt.Errorf("resolve url: %d bytes: %w", len(ref), ErrTooLong)
	}
	if r.base == nil {
		b, err := url.Parse(r.href)
		if err != nil {
			// Unreachable: canonicalFast accepts only what the parser
			// serializes as it is.
			return "", invalid("resolve url: parse base", err)
		}
		r.base = b
	}
	u, err := r.base.Parse(ref)
	if err != nil {
		return "", invalid("resolve url", err)
	}
	return finish(u)
}

// finish checks the scheme and serializes u canonically.
func finish(u *url.Url) (string, error) {
	if err := checkScheme(u.Scheme()); err != nil {
		return "", fmt.Errorf("canonicalize url: %w", err)
	}
	if u.Hostname() == "" {
		// Unreachable for special schemes under the WHATWG parser; kept so
		// that a host-less URL can never reach a politeness key.
		return "", fmt.Errorf("canonicalize url: empty host: %w", ErrInvalid)
	}
	s := normalize(u.Href(true))
	if len(s) > MaxLength {
		return "", fmt.Errorf("canonicalize url: %d bytes: %w", len(s), ErrTooLong)
	}
	return s, nil
}

func checkScheme(scheme string) error {
	switch scheme {
	case "http", "https", "ftp":
		return nil
	}
	return fmt.Errorf("scheme %q: %w", scheme, ErrScheme)
}

// invalid wraps a parser failure in ErrInvalid. The parser's message quotes
// the whole input, which may be kilobytes long; only its failure type is
// kept (callers log the URL in its own field).
func invalid(op string, err error) error {
	reason := string(whatwgerrors.Type(err))
	if reason == "" {
		reason = err.Error()
	}
	return fmt.Errorf("%s: %w: %s", op, ErrInvalid, reason)
}

// Hostname is a politeness key (host[:port]) without its port: the name
// a rule that lists hosts may give for every port of the host.
func Hostname(key string) string {
	if h, _, err := net.SplitHostPort(key); err == nil {
		return h
	}
	return key
}

// PolitenessKey returns the partitioning key of a URL: its host, lower-cased
// and IDNA-encoded, followed by ":port" when the port is not the scheme's
// default. Two URLs with equal keys are fetched under the same politeness.
//
// The URL need not be canonical; it is parsed the same way as by
// Canonicalize. Trailing dots of a domain are dropped ("example.com." and
// "example.com" are one server), as in the canonical form. IPv6 hosts keep their brackets
// ("[::1]:8080").
//
// A plainly canonical URL (canonicalFast: what the fetcher consumes) is
// not parsed: its key is its authority as written. That is the slow
// path's key: the parser serializes such a URL as it is, and its
// serialization is scheme "://" host [":" port] path, with no user
// information (the authority has no '@'), so u.Hostname() and u.Port()
// are the host and the port written in it; the scheme is http or https;
// the host is not an IPv6 literal (no '['), not empty and has no trailing
// dot, which trimDots would remove.
func PolitenessKey(rawURL string) (string, error) {
	if len(rawURL) > maxInput {
		return "", fmt.Errorf("politeness key: %d bytes: %w", len(rawURL), ErrTooLong)
	}
	if auth, ok := plainCanonical(rawURL); ok {
		return auth, nil
	}
	return politenessKeySlow(rawURL)
}

// politenessKeySlow is PolitenessKey by the WHATWG parser, whatever the
// spelling of rawURL (at most maxInput bytes).
func politenessKeySlow(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", invalid("politeness key", err)
	}
	if err := checkScheme(u.Scheme()); err != nil {
		return "", fmt.Errorf("politeness key: %w", err)
	}
	host := u.Hostname()
	if !u.IsIPv6() {
		host = trimDots(host) // but "." stays "."
	}
	if host == "" {
		return "", fmt.Errorf("politeness key: empty host: %w", ErrInvalid)
	}
	if p := u.Port(); p != "" {
		return host + ":" + p, nil
	}
	return host, nil
}

// CanonicalKey returns PolitenessKey(canonical) for a canonical URL (a
// result of Canonicalize or Resolve) without parsing it again: the host and
// port of its authority, which canonicalization already lower-cased,
// IDNA-encoded, stripped of trailing dots and of the default port. An
// authority it cannot vouch for (characters a canonical host cannot hold,
// a trailing dot) goes through PolitenessKey. The parser and the scheduler
// key tens of links per page this way: the WHATWG parse was a tenth of the
// parser's CPU.
func CanonicalKey(canonical string) (string, error) {
	i := strings.Index(canonical, "://")
	if i < 0 || !slicesContains(schemes, canonical[:i]) {
		return PolitenessKey(canonical)
	}
	auth := canonical[i+3:]
	if end := strings.IndexAny(auth, "/?#"); end >= 0 {
		auth = auth[:end]
	}
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		auth = auth[at+1:]
	}
	if auth == "" || auth[0] == ':' || !plainAuthority(auth) {
		return PolitenessKey(canonical)
	}
	return auth, nil
}

// schemes are the schemes Canonicalize accepts.
var schemes = []string{"http", "https", "ftp"}

func slicesContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// plainAuthority reports whether auth is a host[:port] that a canonical URL
// can hold as it is: lower-case letters, digits, '-', '.', an IPv6 literal
// in brackets, a numeric port, and no trailing dot.
func plainAuthority(auth string) bool {
	host, port := auth, ""
	if auth[0] == '[' {
		end := strings.IndexByte(auth, ']')
		if end < 0 {
			return false
		}
		for _, c := range auth[1:end] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == ':' || c == '.') {
				return false
			}
		}
		port = auth[end+1:]
		if port != "" && port[0] != ':' {
			return false
		}
	} else {
		if i := strings.LastIndexByte(auth, ':'); i >= 0 {
			host, port = auth[:i], auth[i:]
		}
		if host == "" || host[len(host)-1] == '.' {
			return false
		}
		for _, c := range host {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
				return false
			}
		}
		// A host ending in a number is an IPv4 address to the parser
		// (0x7f.1 is 127.0.0.1): only the dotted-decimal form is plain.
		last := host[strings.LastIndexByte(host, '.')+1:]
		if last != "" && (last[0] >= '0' && last[0] <= '9') && !dottedQuad(host) {
			return false
		}
	}
	if port != "" {
		if len(port) < 2 || len(port) > 6 {
			return false
		}
		for _, c := range port[1:] {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

// dottedQuad reports whether host is four decimal numbers 0-255 without
// leading zeros, the canonical form of an IPv4 address.
func dottedQuad(host string) bool {
	for i := range 4 {
		p, rest, found := strings.Cut(host, ".")
		if found != (i < 3) || p == "" || len(p) > 3 || (len(p) > 1 && p[0] == '0') {
			return false
		}
		n := 0
		for _, c := range []byte(p) {
			if c < '0' || c > '9' {
				return false
			}
			n = n*10 + int(c-'0')
		}
		if n > 255 {
			return false
		}
		host = rest
	}
	return true
}

// NormalizePercent normalizes the percent-escapes of s: hex digits are
// upper-cased, escapes of unreserved characters (ALPHA DIGIT - . _ ~) are
// decoded, and a '%' not followed by two hex digits becomes "%25". Every
// other byte is copied. It is idempotent, and returns s itself (no
// allocation) when there is nothing to change.
func NormalizePercent(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b []byte
	for ; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			switch {
			case isUnreserved(v):
				b = grow(b, s, i)
				b = append(b, v)
			case isLowerHex(s[i+1]) || isLowerHex(s[i+2]):
				b = grow(b, s, i)
				b = append(b, '%', upperHex[v>>4], upperHex[v&15])
			case b != nil:
				b = append(b, s[i:i+3]...)
			}
			i += 2
			continue
		}
		b = grow(b, s, i)
		b = append(b, "%25"...)
	}
	if b == nil {
		return s
	}
	return string(b)
}

// grow starts the output buffer with s[:i] the first time a change is made.
func grow(b []byte, s string, i int) []byte {
	if b != nil {
		return b
	}
	b = make([]byte, 0, len(s)+8)
	return append(b, s[:i]...)
}

const upperHex = "0123456789ABCDEF"

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isLowerHex(c byte) bool { return 'a' <= c && c <= 'f' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
