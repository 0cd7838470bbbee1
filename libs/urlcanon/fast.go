package urlcanon

import "strings"

// The fast path: most links a page holds are spelled plainly ("/a/b?x=1",
// "b.html", "https://host/p"), and most URLs the scheduler admits are
// already canonical. For those the WHATWG parser, then normalize, would
// return a concatenation of the base's serialization and the reference, or
// the input itself; the functions here recognize such inputs and build that
// string without parsing. They may decline anything (the caller then takes
// the slow path); what they return equals the slow path's result.
//
// Why the result is the same, for a base whose serialization is B (http or
// https, no user information, host and port as the parser writes them,
// normalize(B) == B) and a reference of only the plain bytes below:
//
//   - The parser trims C0 controls and spaces and removes tabs and
//     newlines: a plain reference has none (before its fragment; trimming
//     stops at the '#').
//   - A fragment is never a failure and never serialized by Href(true):
//     "#" and what follows are cut. An empty rest is declined (not that it
//     would differ: the parser then returns B itself).
//   - Path bytes: ALPHA DIGIT - . _ ~ ! $ & ' ( ) * + , ; = : @ and '/' as
//     separator. None is in the WHATWG path percent-encode set (C0, space,
//     " # < > ? ` { } and non-ASCII), none is rewritten by normalize (no '%'
//     at all, and each is allowed raw in an RFC 3986 path).
//   - Query bytes: the same without "'" (the parser encodes it in the query
//     of special schemes) and with '?'.
//   - No path segment is "." or ".." (the parser removes them; "%2e" cannot
//     occur without '%'), so the parser keeps every segment as written,
//     empty ones too ("a//b").
//   - A path-relative reference has no ':' before its first '/' or '?' (it
//     could be a scheme: "http:x", "mailto:x").
//   - The host of an absolute or scheme-relative reference is either the
//     base's (same scheme, same authority: parsing a host the parser wrote
//     gives it back, as the idempotence of Canonicalize requires) or plain:
//     see plainHostPort.
//
// The parser then builds: origin + ref for "/…"; the base path + ref for
// "?…"; the base directory + ref for "a/b"; scheme://host[:port] + path for
// "//host…" and "http(s)://host…", with "/" for an empty path. normalize
// leaves each unchanged: its escapes are those of B, complete within the
// prefix used (which ends at '/' or before '?'), and the reference adds no
// byte it encodes.

// pathByte and queryByte mark the bytes the fast path accepts in a path and
// in a query (see above). '/' and '?' are delimiters handled by the scan.
var pathByte, queryByte = func() (path, query [256]bool) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		path[c] = 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
	}
	for _, c := range []byte("-._~!$&()*+,;=:@/") {
		path[c] = true
	}
	query = path
	path['\''] = true
	query['?'] = true
	return path, query
}()

// plainPathQuery reports whether s, a path (absolute, or relative when
// relative is set) optionally followed by "?query", is made of plain bytes,
// has no "." or ".." segment and, when relative, no ':' in its first
// segment.
func plainPathQuery(s string, relative bool) bool {
	seg := 0 // start of the current segment
	first := relative
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c == '?' {
			if dotSegment(s[seg:i]) {
				return false
			}
			if c == '?' {
				return plainQuery(s[i+1:])
			}
			seg, first = i+1, false
			continue
		}
		if !pathByte[c] || (first && c == ':') {
			return false
		}
	}
	return !dotSegment(s[seg:])
}

func plainQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		if !queryByte[q[i]] {
			return false
		}
	}
	return true
}

func dotSegment(seg string) bool { return seg == "." || seg == ".." }

// plainHostPort reports whether auth is a host[:port] that the WHATWG
// parser, under scheme (http or https), serializes unchanged: a domain of
// labels of 1-63 lower-case letters, digits and '-' (not at either end of a
// label, not "--" in third and fourth position, which rules out punycode
// "xn--" labels whose validation is IDNA's business), at most 253 bytes,
// whose last label does not start with a digit (the parser would read an
// IPv4 address), or a canonical dotted quad; and a port that is absent or
// decimal, without leading zeros, at most 65535, not the scheme's default.
// No user information ('@' is not a host byte), no trailing dot, no empty
// port.
func plainHostPort(scheme, auth string) bool {
	host, port, hasPort := strings.Cut(auth, ":")
	if hasPort && !plainPort(scheme, port) {
		return false
	}
	if host == "" || len(host) > 253 {
		return false
	}
	last := 0 // start of the last label
	for i := 0; i <= len(host); i++ {
		if i < len(host) && host[i] != '.' {
			c := host[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
			continue
		}
		label := host[last:i]
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			len(label) >= 4 && label[2] == '-' && label[3] == '-' {
			return false
		}
		if i < len(host) {
			last = i + 1
		}
	}
	if c := host[last]; '0' <= c && c <= '9' {
		return dottedQuad(host)
	}
	return true
}

func plainPort(scheme, port string) bool {
	if port == "" || len(port) > 5 || (len(port) > 1 && port[0] == '0') {
		return false
	}
	n := 0
	for i := 0; i < len(port); i++ {
		c := port[i]
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	switch {
	case n > 65535:
		return false
	case scheme == "http":
		return n != 80
	case scheme == "https":
		return n != 443
	}
	return false
}

// canonicalFast reports whether raw is plainly canonical: Canonicalize(raw)
// is raw itself (and the WHATWG serialization of raw is raw). That is
// "http" or "https", "://", a plain host and port (plainHostPort), and a
// path starting with '/' and optional query of plain bytes (plainPathQuery),
// at most MaxLength bytes.
func canonicalFast(raw string) bool {
	if len(raw) > MaxLength {
		return false
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return false
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 || rest[end] != '/' {
		return false
	}
	return plainHostPort(scheme, rest[:end]) && plainPathQuery(rest[end:], false)
}

// resolveFast returns the resolution of ref against r's base when the fast
// path applies (r.fast, see the top of this file), false otherwise.
func (r *Resolver) resolveFast(ref string) (string, bool) {
	if !r.fast || len(ref) > maxInput {
		return "", false
	}
	if i := strings.IndexByte(ref, '#'); i >= 0 {
		ref = ref[:i]
	}
	if ref == "" {
		return "", false
	}
	var s string
	switch {
	case strings.HasPrefix(ref, "//"):
		var ok bool
		if s, ok = r.absoluteFast(ref, r.parts.scheme, ref[2:], false); !ok {
			return "", false
		}
	case ref[0] == '/':
		if !plainPathQuery(ref, false) {
			return "", false
		}
		s = r.parts.origin + ref
	case ref[0] == '?':
		if !plainQuery(ref[1:]) {
			return "", false
		}
		s = r.parts.path + ref
	case strings.HasPrefix(ref, "http://"):
		var ok bool
		if s, ok = r.absoluteFast(ref, "http", ref[len("http://"):], true); !ok {
			return "", false
		}
	case strings.HasPrefix(ref, "https://"):
		var ok bool
		if s, ok = r.absoluteFast(ref, "https", ref[len("https://"):], true); !ok {
			return "", false
		}
	default:
		if !plainPathQuery(ref, true) {
			return "", false
		}
		s = r.parts.dir + ref
	}
	if len(s) > MaxLength {
		return "", false // the slow path says how long
	}
	return s, true
}

// absoluteFast returns scheme://rest for a reference ref whose part after
// "//" is rest (abs: after "scheme://"), when its authority is the base's
// (same scheme) or plain and its path and query are plain.
func (r *Resolver) absoluteFast(ref, scheme, rest string, abs bool) (string, bool) {
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth, tail := rest[:end], rest[end:]
	if !(scheme == r.parts.scheme && auth == r.parts.origin[len(scheme)+len("://"):]) &&
		!plainHostPort(scheme, auth) {
		return "", false
	}
	if !plainPathQuery(tail, false) {
		return "", false
	}
	switch {
	case tail == "" || tail[0] == '?':
		return scheme + "://" + auth + "/" + tail, true
	case abs:
		return ref, true // spelled as the parser writes it: no copy
	}
	return scheme + "://" + rest, true
}

// fastBase reports whether references can take the fast path against a
// base whose WHATWG serialization (without fragment) is href: http or
// https, no user information, an authority CanonicalKey would vouch for
// (not an IPv6 literal), and normalize(href) == href.
func fastBase(href string, parts baseParts) bool {
	if parts.scheme != "http" && parts.scheme != "https" {
		return false
	}
	auth := parts.origin[len(parts.scheme)+len("://"):]
	if auth == "" || auth[0] == '[' || auth[0] == ':' || strings.IndexByte(auth, '@') >= 0 || !plainAuthority(auth) {
		return false
	}
	return normalize(href) == href
}
