package extract

import (
	"errors"
	"slices"
	"strings"

	"golang.org/x/net/html/atom"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// followedRels are the <link rel> values whose target is a page to crawl.
var followedRels = []string{"next", "prev", "previous", "alternate", "canonical"}

// resolveLinks applies the link rules to a page's raw links, in document
// order, against base (the resolved <base href>, or the page URL): which
// rel values are followed, nofollow, the canonical link (returned even
// under nofollow), applet codebases; both parsing paths collect rawLinks
// and share these rules.
func resolveLinks(raw []rawLink, base, page string, opts Options, nofollow bool) ([]Link, map[string]int, string) {
	resolver, err := urlcanon.NewResolver(base)
	if err != nil {
		// the base is the canonical page URL or a canonical <base href>
		return nil, map[string]int{DropInvalid: 1}, ""
	}
	resolver.WithCache(opts.Resolved)
	k := newLinkSink(page, opts.MaxOutlinks, len(raw))
	var canonical string
	for _, l := range raw {
		switch l.tag {
		case atom.A, atom.Area:
			if nofollow || hasToken(l.rel, "nofollow") {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Rel: l.rel, Tag: l.tag.String(), Anchor: l.anchor})
		case atom.Frame, atom.Iframe:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Tag: l.tag.String(), Anchor: l.anchor})
		case atom.Link:
			if hasToken(l.rel, "canonical") && canonical == "" {
				if u, err := resolver.Resolve(l.ref); err == nil {
					canonical = u
				}
			}
			if hasToken(l.rel, "stylesheet") || !slices.ContainsFunc(followedRels, func(r string) bool { return hasToken(l.rel, r) }) {
				continue
			}
			if nofollow || hasToken(l.rel, "nofollow") {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Rel: l.rel, Tag: "link"})
		case atom.Body:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Tag: "body"})
		case atom.Applet:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			r := resolver
			if l.hasCB {
				var err error
				if r, err = codebaseResolver(resolver, l.codebase, opts.Resolved); err != nil {
					k.drop(DropInvalid)
					continue
				}
			}
			k.add(r, l.ref, Link{Tag: "applet"})
		case atom.Meta:
			if nofollow {
				k.drop(DropNoFollow)
				continue
			}
			k.add(resolver, l.ref, Link{Rel: "refresh", Tag: "meta"})
		}
	}
	return k.links(), k.dropped, canonical
}

// codebaseResolver resolves an applet's code against its codebase, a
// directory.
func codebaseResolver(r *urlcanon.Resolver, codebase string, cache *urlcanon.ResolveCache) (*urlcanon.Resolver, error) {
	abs, err := r.Resolve(codebase)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(abs, "/") {
		abs += "/"
	}
	cr, err := urlcanon.NewResolver(abs)
	if err != nil {
		return nil, err
	}
	cr.WithCache(cache)
	return cr, nil
}

// linkSink keeps a page's links: resolved, deduplicated, capped, with the
// drops counted.
type linkSink struct {
	max     int
	pageKey string
	seen    map[string]struct{} // dedup keys of the links kept
	out     []Link
	dropped map[string]int
}

// newLinkSink returns a sink for the links of page, sized for about
// expect of them (a hint: the raw links found, at most limit).
func newLinkSink(page string, limit, expect int) *linkSink {
	if limit > 0 {
		expect = min(expect, limit)
	}
	return &linkSink{max: limit, pageKey: urlcanon.Key(page), seen: make(map[string]struct{}, expect), out: make([]Link, 0, expect)}
}

// links returns the links kept: nil when none was.
func (k *linkSink) links() []Link {
	if len(k.out) == 0 {
		return nil
	}
	return k.out
}

func (k *linkSink) drop(reason string) {
	if k.dropped == nil {
		k.dropped = make(map[string]int)
	}
	k.dropped[reason]++
}

// add resolves ref and keeps l with that URL unless it is dropped; it
// reports whether l was kept.
func (k *linkSink) add(r *urlcanon.Resolver, ref string, l Link) bool {
	u, err := r.Resolve(ref)
	switch {
	case errors.Is(err, urlcanon.ErrScheme):
		k.drop(DropScheme)
		return false
	case errors.Is(err, urlcanon.ErrTooLong):
		k.drop(DropTooLong)
		return false
	case err != nil:
		k.drop(DropInvalid)
		return false
	}
	// One resource, one link: spellings are compared by dedup key
	// ("/p?" and "/p" are one link; the first spelling is kept).
	key := urlcanon.Key(u)
	if key == k.pageKey {
		k.drop(DropSelf)
		return false
	}
	if _, dup := k.seen[key]; dup {
		k.drop(DropDuplicate)
		return false
	}
	k.seen[key] = struct{}{}
	if len(k.out) >= k.max {
		k.drop(DropOverCap)
		return false
	}
	l.URL = u
	k.out = append(k.out, l)
	return true
}

func normRel(rel string) string {
	return strings.Join(strings.Fields(strings.ToLower(rel)), " ")
}

func hasToken(list, tok string) bool {
	for _, t := range strings.Fields(list) {
		if t == tok {
			return true
		}
	}
	return false
}
