package urlcanon

import (
	"errors"
	"strconv"
	"strings"
)

// normalize turns a WHATWG serialization without fragment into the
// canonical form (see the package documentation): percent-escapes
// normalized, bytes RFC 3986 does not allow in a path or query encoded, one
// trailing dot of the host removed. It returns href itself (no allocation)
// when there is nothing to change.
func normalize(href string) string {
	s := NormalizePercent(href)
	_, p := pathStart(s)
	if p < 0 {
		return trimHostDot(s)
	}
	return trimHostDot(encodeInvalid(s, p))
}

// NormalizePathQuery returns the canonical spelling of a path and query
// (what follows the authority of a URL, without fragment): the percent-escape
// normalization of NormalizePercent, then every byte RFC 3986 does not allow
// in a path or query percent-encoded, and a "'" of the query encoded as the
// URL serializer encodes it for http, https and ftp. These are the steps
// Canonicalize applies to a URL's path and query, by the same code, so a
// string spelled like a URL path compares with canonical URLs octet for
// octet: the robots.txt matcher normalizes rule paths with it (RFC 9309
// §2.2.2). What it does not do is what only the URL parser does to a whole
// URL: resolving dot segments, backslashes as slashes, dropping tabs and
// newlines. Idempotent; returns s itself (no allocation) when nothing
// changes.
func NormalizePathQuery(s string) string {
	return encodeInvalid(NormalizePercent(s), 0)
}

// pathStart returns the index of the first byte after the authority of a
// serialized URL of a special scheme (its path always starts with '/'), or
// -1 when s is not of the form scheme://authority/….
func pathStart(s string) (authStart, path int) {
	i := strings.Index(s, "://")
	if i < 0 {
		return -1, -1
	}
	authStart = i + 3
	j := strings.IndexAny(s[authStart:], "/?")
	if j < 0 {
		return authStart, len(s)
	}
	return authStart, authStart + j
}

// encodeInvalid percent-encodes the bytes of s from p on (its path and
// query) that RFC 3986 does not allow there (anything but unreserved,
// sub-delims, ':', '@', '/', '?' and the '%' of an escape), and the "'" of
// the query, which the WHATWG serializer encodes in the query of special
// schemes (so a parsed URL never has one left). s must be
// percent-normalized, so every '%' already starts a valid escape.
func encodeInvalid(s string, p int) string {
	q := strings.IndexByte(s[p:], '?')
	if q < 0 {
		q = len(s)
	} else {
		q += p
	}
	n := 0
	for i := p; i < len(s); i++ {
		if !uriByte[s[i]] || (i > q && s[i] == '\'') {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	b = append(b, s[:p]...)
	for i := p; i < len(s); i++ {
		c := s[i]
		if uriByte[c] && (i <= q || c != '\'') {
			b = append(b, c)
			continue
		}
		b = append(b, '%', upperHex[c>>4], upperHex[c&15])
	}
	return string(b)
}

// uriByte marks the bytes allowed unencoded in an RFC 3986 path or query:
// unreserved, sub-delims, ':', '@', '/', '?', and '%' (which starts an
// escape in a percent-normalized string).
var uriByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = isUnreserved(byte(c))
	}
	for _, c := range []byte("!$&'()*+,;=:@/?%") {
		t[c] = true
	}
	return t
}()

// trimHostDot removes the trailing dots of the host of s ("example.com.",
// also with a port or user information), as PolitenessKey does. IPv6
// literals and a host of dots only are left alone.
func trimHostDot(s string) string {
	a, p := pathStart(s)
	if a < 0 {
		return s
	}
	auth := s[a:p]
	h := strings.LastIndexByte(auth, '@') + 1 // start of host within auth
	host := auth[h:]
	if strings.HasPrefix(host, "[") {
		return s
	}
	if c := strings.IndexByte(host, ':'); c >= 0 {
		host = host[:c]
	}
	trimmed := trimDots(host)
	if len(trimmed) == len(host) {
		return s
	}
	end := a + h + len(host)
	return s[:end-(len(host)-len(trimmed))] + s[end:]
}

// trimDots removes the trailing dots of a domain, unless nothing would be
// left ("." stays ".") or what is left ends in a number: the URL parser
// reads such a host as an IPv4 address ("0.." is a domain, "0" is 0.0.0.0,
// "foo.09" is refused), so "0.." and "foo.09.." keep their dots and the
// canonical form stays idempotent.
func trimDots(host string) string {
	t := strings.TrimRight(host, ".")
	if t == "" || t == host || endsInNumber(t) {
		return host
	}
	return t
}

// endsInNumber is the URL standard's "ends in a number" test of a host
// without trailing dot, as github.com/nlnwa/whatwg-url applies it: its last
// label is decimal digits, or what the library's IPv4 number parser
// accepts ("0x" and hex digits, "0" and octal digits, a decimal number).
// That parser calls strconv.ParseInt, which also takes a sign: "+0" and
// "0x-1" are numbers to it (not to the standard), so they are here too,
// or "+0.." would lose its dots and then parse as 0.0.0.0.
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if all(last, isDigit) {
		return true
	}
	input, base := last, 10
	switch {
	case strings.HasPrefix(last, "0x") || strings.HasPrefix(last, "0X"):
		input, base = last[2:], 16
	case len(last) >= 2 && last[0] == '0':
		input, base = last[1:], 8
	}
	if input == "" {
		return true // "0x": the number 0
	}
	_, err := strconv.ParseInt(input, base, 64)
	return err == nil || errors.Is(err, strconv.ErrRange)
}
