package urlcanon

import "strings"

// Key returns the dedup key of a canonical URL (a result of Canonicalize or
// Resolve): the string the crawl's seen set fingerprints
// (libs/fingerprint.URL applies it), so that every spelling of one resource
// is fetched once, while the fetcher still requests the canonical URL as it
// was found. Key of a key is the key itself.
//
// The rules, each applied by the reference crawlers' "already seen" test:
//
//   - An empty query is no query, and empty query parameters are dropped:
//     "/p?" and "/p", "/p?&a=1&" and "/p?a=1", "/p?a=1&&b=2" and
//     "/p?a=1&b=2" are one resource (Heritrix's FixupQueryString rule;
//     w3lib's canonicalize_url skips empty pairs; every server parses them
//     the same).
//   - Session ids are dropped (Heritrix's StripSessionIDs and
//     StripSessionCFIDs rules, with their patterns, case-insensitive):
//     query parameters jsessionid, phpsessid and sid with a value of 32
//     letters and digits, aspsessionid<8 letters> with 24 letters, cfid with
//     digits and cftoken with letters, digits and '-'; and the servlet path
//     parameter ";jsessionid=…" (any value). A session id names the
//     visitor, not the page: without this rule every visit of a
//     URL-rewriting site is a new copy of it (a crawler trap).
//
// Rules deliberately not applied, because different strings may be
// different resources or different hosts:
//
//   - query parameters are not sorted (w3lib sorts them; Heritrix and
//     Nutch do not; some servers read them in order);
//   - "www." is not stripped (Heritrix's default does so for its key; here a
//     host is a politeness key and a partition, so a key may never move a URL
//     to another host; and many sites serve different content there);
//   - the path keeps its case, its trailing slash and "index.html"
//     (case-sensitive servers are the norm; "/a" and "/a/" differ);
//   - user information is kept (it may be the credentials of an FTP
//     resource).
func Key(canonical string) string {
	path, query, hasQuery := strings.Cut(canonical, "?")
	_, p := pathStart(path)
	if p < 0 {
		p = 0
	}
	stripped := stripPathSession(path[p:])
	cleaned, changed := cleanQuery(query)
	if len(stripped) == len(path)-p && !changed && (!hasQuery || query != "") {
		return canonical // the common case: nothing to drop, nothing allocated
	}
	if cleaned == "" {
		return path[:p] + stripped
	}
	return path[:p] + stripped + "?" + cleaned
}

// stripPathSession removes a ";jsessionid=…" path parameter (up to the next
// '/' or ';', case-insensitive name) from the path part of a URL.
func stripPathSession(path string) string {
	const param = ";jsessionid="
	if strings.IndexByte(path, ';') < 0 {
		return path
	}
	for {
		i := indexFold(path, param)
		if i < 0 {
			return path
		}
		end := i + len(param)
		for end < len(path) && path[end] != '/' && path[end] != ';' {
			end++
		}
		path = path[:i] + path[end:]
	}
}

// cleanQuery drops the empty parameters and the session ids of a query
// (without its '?'), reporting whether anything was dropped. It allocates
// only when something is dropped.
func cleanQuery(query string) (string, bool) {
	if !dropsParam(query) {
		return query, false
	}
	var b strings.Builder
	for param := range strings.SplitSeq(query, "&") {
		if param == "" || isSessionParam(param) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(param)
	}
	return b.String(), true
}

// dropsParam reports whether cleanQuery drops a parameter of query.
func dropsParam(query string) bool {
	if query == "" {
		return false
	}
	for param := range strings.SplitSeq(query, "&") {
		if param == "" || isSessionParam(param) {
			return true
		}
	}
	return false
}

// isSessionParam reports whether name=value is a session id by the
// patterns of Heritrix's StripSessionIDs and StripSessionCFIDs rules.
func isSessionParam(param string) bool {
	name, value, ok := strings.Cut(param, "=")
	if !ok {
		return false
	}
	switch {
	case strings.EqualFold(name, "jsessionid"), strings.EqualFold(name, "phpsessid"), strings.EqualFold(name, "sid"):
		return len(value) == 32 && all(value, isAlnum)
	case len(name) == len("aspsessionid")+8 && strings.EqualFold(name[:len("aspsessionid")], "aspsessionid"):
		return all(name[len("aspsessionid"):], isAlpha) && len(value) == 24 && all(value, isAlpha)
	case strings.EqualFold(name, "cfid"):
		return value != "" && all(value, isDigit)
	case strings.EqualFold(name, "cftoken"):
		return value != "" && all(value, func(c byte) bool { return isAlnum(c) || c == '-' })
	}
	return false
}

func all(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool { return isAlpha(c) || isDigit(c) }

// indexFold is strings.Index ignoring ASCII case of s (sub is lower-case).
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
