package urlcanon

import (
	"bytes"
	"strings"
)

// The fast path: most links a page holds are spelled plainly ("/a/b?x=1",
// "b.html", "../c.html", "https://host/p"), and most URLs the scheduler
// admits are already canonical. For those the WHATWG parser, then
// normalize, would return a concatenation of the base's serialization and
// the reference (less the segments that "." and ".." remove), or the input
// itself; the functions here recognize such inputs and build that string
// without parsing. They may decline anything (the caller then takes the
// slow path); what they return equals the slow path's result.
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
//     would differ: the parser then returns B itself). To the path state
//     the '#' ends the path as the end of the input does.
//   - Path bytes: ALPHA DIGIT - . _ ~ ! $ & ' ( ) * + , ; = : @ and '/' as
//     separator. None is in the WHATWG path percent-encode set (C0, space,
//     " # < > ? ` { } and non-ASCII), none is rewritten by normalize (each
//     is allowed raw in an RFC 3986 path).
//   - Query bytes: the same without "'" (the parser encodes it in the query
//     of special schemes) and with '?'.
//   - Escapes: '%' and two hex digits, in the path and the query, except
//     an escaped '.' ("%2e", "%2E") in the path, which the parser reads in
//     a dot segment. The parser copies an escape as it is ('%' and hex
//     digits are in no percent-encode set), so the result is built as for
//     plain bytes, then normalize's NormalizePercent applies: escapes of
//     unreserved bytes decoded, the others' hex digits upper-cased. Decoding
//     yields only unreserved bytes, none a '.' of the path, so it creates no
//     dot segment, no delimiter and nothing encodeInvalid would encode; the
//     base's part of the result is normalized already. A '%' without two
//     hex digits is declined (normalize would write "%25").
//   - A path-relative reference has no ':' before its first '/' or '?' (it
//     could be a scheme: "http:x", "mailto:x").
//   - The scheme of an absolute reference is "http" or "https" in any ASCII
//     case, followed by "://": the scheme state lower-cases ASCII letters
//     (and takes no other letter) before it compares the scheme with the
//     base's, so "HTTP://h/" is "http://h/" to the rest of the parser, and
//     "//" then leads to the authority whether or not the scheme is the
//     base's. hasPrefixFold compares bytes, not Unicode case folds ('ſ'
//     and the Kelvin sign are not "s" and "k" here); the result is written
//     with the lower-case scheme.
//   - The host of an absolute or scheme-relative reference is either the
//     base's (same scheme, same authority: parsing a host the parser wrote
//     gives it back, as the idempotence of Canonicalize requires) or plain:
//     see plainHostPort.
//
// The path (https://url.spec.whatwg.org/#path-state). The parser's path is
// a list of segments, serialized as "/" before each. The path state starts
// from the empty list for "/…" (relative slash state), "//host…" and
// "http(s)://host…" (the path start state consumes the '/' after the
// host, if any), and from the base's list without its last segment for a
// path-relative "a/b" (relative state: "shorten url's path"). It then
// takes each segment of the reference, up to a '/', a '?' or the end:
//
//   - ".." (or ".%2e", "%2e.", "%2e%2e" in any case) removes the last
//     segment, if there is one, then, unless the segment ended at '/',
//     appends "": "/a/b/.." is "/a/", and ".." at the root stays there
//     ("/.." and "/../.." are "/");
//   - "." (or "%2e", "%2E") appends "" unless it ended at '/': "/a/./b" is
//     "/a/b", "/a/." is "/a/";
//   - any other segment is appended as written (plain bytes are not
//     encoded), empty ones too ("a//b").
//
// A plain segment is "." or ".." only as such: the escaped forms need '%'.
// The base's list is B's path split at '/': the parser splits at every '/'
// (an encoded one is "%2F") and never keeps a dot segment, so parsing B
// gives the list back. The last segment of a reference ends at '?' or the
// end, so the resulting list is never empty and the path never "".
//
// Without dot segments the parser then builds: origin + ref for "/…"; the
// base path + ref for "?…"; the base directory + ref for "a/b";
// scheme://host[:port] + path for "//host…" and "http(s)://host…", with
// "/" for an empty path. With dot segments appendPath applies the steps
// above to the serialization itself: the list so far is what follows the
// origin ("" or "/s1/…/sn"); appending a segment appends '/' and it;
// removing the last cuts at the last '/' after the origin.
//
// normalize leaves each result unchanged but for the reference's escapes
// (above): its path is a prefix of B's path cut at a '/' (or none of it)
// followed by plain segments, then the reference's plain query if it has
// one, so B's escapes stay complete (an escape holds no '/'), and the
// reference adds no byte it encodes; its host is B's or plain (no
// trailing dot).

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

// scanPathQuery reports whether s, a path (absolute, or relative when
// relative is set) optionally followed by "?query", is made of plain bytes
// and escapes (validEscape; in the path not an escaped '.') and, when
// relative, has no ':' in its first segment; and whether a segment of its
// path is "." or "..".
func scanPathQuery(s string, relative bool) (plain, dots bool) {
	seg := 0 // start of the current segment
	first := relative
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c == '?' {
			dots = dots || dotSegment(s[seg:i])
			if c == '?' {
				return plainQuery(s[i+1:]), dots
			}
			seg, first = i+1, false
			continue
		}
		if c == '%' {
			if !validEscape(s, i) || s[i+1] == '2' && (s[i+2] == 'e' || s[i+2] == 'E') {
				return false, false
			}
			i += 2
			continue
		}
		if !pathByte[c] || (first && c == ':') {
			return false, false
		}
	}
	return true, dots || dotSegment(s[seg:])
}

func plainQuery(q string) bool {
	for i := 0; i < len(q); i++ {
		if q[i] == '%' {
			if !validEscape(q, i) {
				return false
			}
			i += 2
			continue
		}
		if !queryByte[q[i]] {
			return false
		}
	}
	return true
}

// validEscape reports whether s[i], a '%', starts an escape: two hex
// digits follow it.
func validEscape(s string, i int) bool {
	return i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])
}

func dotSegment(seg string) bool { return seg == "." || seg == ".." }

// appendPath appends to b, the serialization of a URL up to the end of its
// path, of which b[:root] is the origin, the plain path and query pq as the
// WHATWG path state appends them (see the top of this file): the segments
// of pq's path each appended after a '/', "." and ".." resolved, then
// pq's "?query" as it is. pq's path is relative: a leading '/' is an
// empty first segment.
func appendPath(b []byte, root int, pq string) []byte {
	path, query, hasQuery := strings.Cut(pq, "?")
	for more := true; more; {
		var seg string
		seg, path, more = strings.Cut(path, "/")
		switch seg {
		case "..":
			b = b[:root+max(bytes.LastIndexByte(b[root:], '/'), 0)]
			if !more {
				b = append(b, '/')
			}
		case ".":
			if !more {
				b = append(b, '/')
			}
		default:
			b = append(b, '/')
			b = append(b, seg...)
		}
	}
	if hasQuery {
		b = append(b, '?')
		b = append(b, query...)
	}
	return b
}

// resolveDots returns the concatenation of pre, the serialization of a URL
// up to the end of its path whose first root bytes are the origin, with
// the plain path and query pq appended by appendPath. It builds the string
// in a buffer on the stack for all but long results.
func resolveDots(pq string, root int, pre ...string) string {
	var buf [256]byte
	b := buf[:0]
	for _, p := range pre {
		b = append(b, p...)
	}
	return string(appendPath(b, root, pq))
}

// hasPrefixFold reports whether s starts with prefix (lower-case ASCII)
// in any ASCII case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

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
// is raw itself (and the WHATWG serialization of raw is raw). See
// plainCanonical.
func canonicalFast(raw string) bool {
	_, ok := plainCanonical(raw)
	return ok
}

// plainCanonical returns the authority (host[:port]) of raw when raw is
// plainly canonical: "http" or "https", "://", a plain host and port
// (plainHostPort), and a path starting with '/' and optional query of
// plain bytes and normalized escapes without dot segments (scanPathQuery,
// NormalizePercent), at most MaxLength bytes. The WHATWG parser
// serializes such a raw as it is, so the host and port it parses are
// those written in raw (see PolitenessKey).
func plainCanonical(raw string) (auth string, ok bool) {
	if len(raw) > MaxLength {
		return "", false
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return "", false
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 || rest[end] != '/' || !plainHostPort(scheme, rest[:end]) {
		return "", false
	}
	if plain, dots := scanPathQuery(rest[end:], false); !plain || dots {
		return "", false
	}
	if NormalizePercent(raw) != raw { // raw itself, unallocated, without '%'
		return "", false // an escape to decode or to upper-case
	}
	return rest[:end], true
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
		if s, ok = r.absoluteFast(r.parts.scheme, ref[2:], ""); !ok {
			return "", false
		}
	case ref[0] == '/':
		plain, dots := scanPathQuery(ref, false)
		switch {
		case !plain:
			return "", false
		case dots:
			s = resolveDots(ref[1:], len(r.parts.origin), r.parts.origin)
		default:
			s = r.parts.origin + ref
		}
	case ref[0] == '?':
		if !plainQuery(ref[1:]) {
			return "", false
		}
		s = r.parts.path + ref
	case hasPrefixFold(ref, "http://"):
		var ok bool
		if s, ok = r.absoluteFast("http", ref[len("http://"):], ref); !ok {
			return "", false
		}
	case hasPrefixFold(ref, "https://"):
		var ok bool
		if s, ok = r.absoluteFast("https", ref[len("https://"):], ref); !ok {
			return "", false
		}
	default:
		plain, dots := scanPathQuery(ref, true)
		switch {
		case !plain:
			return "", false
		case dots:
			// dir ends in '/': less it, the base's path less its last segment.
			dir := r.parts.dir
			s = resolveDots(ref, len(r.parts.origin), dir[:len(dir)-1])
		default:
			s = r.parts.dir + ref
		}
	}
	if strings.IndexByte(ref, '%') >= 0 {
		// Escapes: the parser copies them as they are, and normalize
		// decodes those of unreserved bytes and upper-cases the others'
		// hex digits; the base's own are normalized already.
		s = NormalizePercent(s)
	}
	if len(s) > MaxLength {
		return "", false // the slow path says how long
	}
	return s, true
}

// absoluteFast returns the resolution of scheme://rest, an absolute or
// scheme-relative reference whose part after "//" is rest, when its
// authority is the base's (same scheme) or plain and its path and query
// are plain. spelled is the reference when it is absolute ("" when it is
// scheme-relative): it is the result when the parser writes it as it is.
func (r *Resolver) absoluteFast(scheme, rest, spelled string) (string, bool) {
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	auth, tail := rest[:end], rest[end:]
	if !(scheme == r.parts.scheme && auth == r.parts.origin[len(scheme)+len("://"):]) &&
		!plainHostPort(scheme, auth) {
		return "", false
	}
	plain, dots := scanPathQuery(tail, false)
	switch {
	case !plain:
		return "", false
	case dots: // then tail starts with '/' (a '?' would end the path first)
		return resolveDots(tail[1:], len(scheme)+len("://")+len(auth), scheme, "://", auth), true
	case tail == "" || tail[0] == '?':
		return scheme + "://" + auth + "/" + tail, true
	case len(spelled) > len(scheme) && spelled[:len(scheme)] == scheme:
		return spelled, true // spelled as the parser writes it: no copy
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
