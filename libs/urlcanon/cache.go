package urlcanon

import (
	"strings"
	"sync"
)

// ResolveCache remembers resolutions that pages share: a page's links are
// mostly the site's navigation, lists and neighbours, spelled the same way
// on every page of the site, and the WHATWG parse of each was a seventh of
// the parser's CPU. A reference is cached under the part of the base its
// result depends on:
//
//   - an absolute URL of another scheme than the base's, or of the same
//     followed by "//": the reference alone;
//   - a scheme-relative "//host/…": the base's scheme;
//   - a path-absolute "/…": the base's scheme and authority;
//   - a query "?…": the base without its query;
//   - a path-relative "a/b", "../c": the base's directory.
//
// References the parser would rewrite before classifying them (with spaces
// or control characters, starting with a backslash, "/\"), empty ones,
// fragments and long ones are not cached. Entries live in two generations
// of at most size/2 each: the older is dropped when the newer fills up.
// Safe for concurrent use.
type ResolveCache struct {
	half int

	mu       sync.Mutex
	cur, old map[resolveKey]resolved
}

type resolveKey struct {
	base string // the part of the base the result depends on
	ref  string
}

type resolved struct {
	url string
	err error
}

// maxCachedRef bounds the references cached.
const maxCachedRef = 512

// NewResolveCache returns a cache of about size entries, or nil (no cache)
// when size < 2.
func NewResolveCache(size int) *ResolveCache {
	if size < 2 {
		return nil
	}
	return &ResolveCache{half: size / 2, cur: make(map[resolveKey]resolved)}
}

func (c *ResolveCache) get(k resolveKey) (resolved, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r, ok := c.cur[k]; ok {
		return r, true
	}
	if r, ok := c.old[k]; ok {
		c.putLocked(k, r) // still in use: keep it in the newer generation
		return r, true
	}
	return resolved{}, false
}

func (c *ResolveCache) put(k resolveKey, r resolved) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(k, r)
}

func (c *ResolveCache) putLocked(k resolveKey, r resolved) {
	if len(c.cur) >= c.half {
		c.old, c.cur = c.cur, make(map[resolveKey]resolved, c.half)
	}
	c.cur[k] = r
}

// baseParts are the prefixes of a base's serialization that references
// depend on.
type baseParts struct {
	scheme string // "http"
	origin string // "http://user@host:port"
	dir    string // origin + the path up to its last '/'
	path   string // origin + the whole path (no query)
}

func partsOf(href string) (baseParts, bool) {
	colon := strings.IndexByte(href, ':')
	a, p := pathStart(href)
	if colon <= 0 || a < 0 || p >= len(href) || href[p] != '/' {
		return baseParts{}, false
	}
	end := len(href)
	if q := strings.IndexAny(href[p:], "?#"); q >= 0 {
		end = p + q
	}
	path := href[:end]
	return baseParts{
		scheme: href[:colon],
		origin: href[:p],
		dir:    path[:strings.LastIndexByte(path, '/')+1],
		path:   path,
	}, true
}

// key returns the cache key of ref against a base of parts b, false when
// ref is not cached.
func (b baseParts) key(ref string) (resolveKey, bool) {
	if ref == "" || len(ref) > maxCachedRef || ref[0] == '#' || ref[0] == '\\' {
		return resolveKey{}, false
	}
	for i := 0; i < len(ref); i++ {
		if ref[i] <= ' ' || ref[i] == 0x7f {
			return resolveKey{}, false
		}
	}
	if scheme, rest, ok := splitScheme(ref); ok {
		if !strings.EqualFold(scheme, b.scheme) || strings.HasPrefix(rest, "//") {
			return resolveKey{ref: ref}, true
		}
		return resolveKey{}, false // "http:x" against an http base: relative
	}
	switch {
	case strings.HasPrefix(ref, "//"):
		return resolveKey{base: b.scheme, ref: ref}, true
	case ref[0] == '/':
		if len(ref) > 1 && ref[1] == '\\' {
			return resolveKey{}, false
		}
		return resolveKey{base: b.origin, ref: ref}, true
	case ref[0] == '?':
		return resolveKey{base: b.path, ref: ref}, true
	default:
		return resolveKey{base: b.dir, ref: ref}, true
	}
}

// splitScheme returns the scheme of a reference that starts with one
// (ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":") and what follows it.
func splitScheme(ref string) (scheme, rest string, ok bool) {
	for i := 0; i < len(ref); i++ {
		c := ref[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return ref[:i], ref[i+1:], true
		default:
			return "", "", false
		}
	}
	return "", "", false
}
