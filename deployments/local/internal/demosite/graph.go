// Package demosite serves a generated multi-host web site on loopback
// addresses (127.0.0.x, one real HTTP server per host) for local crawls and
// end-to-end tests, and knows from its own link graph which URLs a correct
// crawler must fetch.
//
// Every host serves the same shape of site:
//
//	/robots.txt            disallows /private/
//	/                      index, links to the first pages
//	/sec<k>/page<i>.html   generated pages; links are absolute (other hosts),
//	                       host-relative, "./", "../" and fragment variants
//	/base.html             uses <base href="/based/">; its relative link only
//	                       resolves correctly against the base
//	/based/target.html     reachable only through base.html
//	/private/secret.html   linked, but disallowed by robots.txt
//	/missing.html          linked, answers 404
//	/redirect              linked, 301 to the next host's /landing.html
//	/landing.html          reachable only through the redirect
//	/data.json             linked, not HTML
//	/big.html              oversized page (linked when Config.LinkBig)
//	/slow.html             sleeps Config.SlowDelay (linked when Config.LinkSlow)
package demosite

import (
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
)

// Fixed paths of the special pages.
const (
	PathRobots   = "/robots.txt"
	PathIndex    = "/"
	PathBase     = "/base.html"
	PathBased    = "/based/target.html"
	PathPrivate  = "/private/secret.html"
	PathMissing  = "/missing.html"
	PathRedirect = "/redirect"
	PathLanding  = "/landing.html"
	PathData     = "/data.json"
	PathBig      = "/big.html"
	PathSlow     = "/slow.html"

	// DisallowedPrefix is the path prefix every robots.txt disallows.
	DisallowedPrefix = "/private/"
)

// kind is what a path serves.
type kind int

const (
	kindHTML kind = iota
	kindMissing
	kindRedirect
	kindData
	kindBig
	kindSlow
)

// node is one path of one host in the link graph.
type node struct {
	host  int
	path  string
	kind  kind
	title string
	links []link
}

// link is one <a href> of a page: its target and the href as written.
type link struct {
	host int
	path string
	href string // "" when the href needs the host's address (absolute link)
	abs  bool
}

// graph is the generated site: nodes by host and path.
type graph struct {
	hosts int
	nodes []map[string]*node
}

func pagePath(i int) string { return fmt.Sprintf("/sec%d/page%d.html", i%4, i) }

// relHref returns the href that resolves to target from a page at from,
// written relative with "./" or "../" where the directories allow.
func relHref(from, target string) string {
	fromDir := path.Dir(from)
	toDir := path.Dir(target)
	base := path.Base(target)
	switch {
	case fromDir == toDir:
		return "./" + base
	case toDir == path.Dir(fromDir):
		return "../" + base
	case path.Dir(fromDir) == path.Dir(toDir):
		return "../" + path.Base(toDir) + "/" + base
	default:
		return target
	}
}

// newGraph generates the link graph of cfg deterministically from cfg.Seed.
func newGraph(cfg Config) *graph {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7261776c))
	g := &graph{hosts: cfg.Hosts, nodes: make([]map[string]*node, cfg.Hosts)}
	pagesOf := func(h int) int {
		if h == 0 && cfg.FirstHostPages > 0 {
			return cfg.FirstHostPages
		}
		return cfg.PagesPerHost
	}
	for h := 0; h < cfg.Hosts; h++ {
		n := pagesOf(h)
		nodes := make(map[string]*node)
		add := func(p string, k kind, title string) *node {
			nd := &node{host: h, path: p, kind: k, title: title}
			nodes[p] = nd
			return nd
		}
		index := add(PathIndex, kindHTML, fmt.Sprintf("Host %d index", h))
		pages := make([]*node, n)
		for i := range n {
			pages[i] = add(pagePath(i), kindHTML, fmt.Sprintf("Host %d page %d", h, i))
		}
		base := add(PathBase, kindHTML, fmt.Sprintf("Host %d base", h))
		add(PathBased, kindHTML, fmt.Sprintf("Host %d based target", h))
		add(PathPrivate, kindHTML, fmt.Sprintf("Host %d private", h))
		add(PathMissing, kindMissing, "")
		add(PathRedirect, kindRedirect, "")
		add(PathLanding, kindHTML, fmt.Sprintf("Host %d landing", h))
		add(PathData, kindData, "")
		add(PathBig, kindBig, "")
		add(PathSlow, kindSlow, "")

		local := func(from *node, to string, style int) link {
			var href string
			switch style % 4 {
			case 0:
				href = to
			case 1:
				href = relHref(from.path, to)
			case 2:
				href = relHref(from.path, to) + "#section"
			default:
				href = relHref(from.path, to)
				if !strings.HasPrefix(href, ".") {
					href = to + "#top"
				}
			}
			return link{host: h, path: to, href: href}
		}
		// The index links to the root of a binary tree over the pages and
		// to the special pages, so every page is reachable at a small depth.
		if n > 0 {
			index.links = append(index.links, local(index, pages[0].path, 0))
		}
		if n > 1 {
			index.links = append(index.links, local(index, pages[1].path, 0))
		}
		index.links = append(index.links,
			link{host: h, path: PathBase, href: "base.html"},
			link{host: h, path: PathData, href: PathData},
		)
		base.links = append(base.links, link{host: h, path: PathBased, href: "target.html"})
		for i, p := range pages {
			for _, c := range []int{2*i + 2, 2*i + 3} {
				if c < n {
					p.links = append(p.links, local(p, pages[c].path, i+c))
				}
			}
			// A few random same-host links (duplicates of tree edges are
			// fine: the crawler must still fetch each page once).
			for k := 0; k < 2 && n > 0; k++ {
				t := rng.IntN(n)
				p.links = append(p.links, local(p, pages[t].path, rng.IntN(4)))
			}
			// Cross-host links, absolute.
			if cfg.Hosts > 1 && rng.IntN(3) == 0 {
				oh := rng.IntN(cfg.Hosts)
				if oh != h && n > 0 {
					p.links = append(p.links, link{host: oh, path: pagePath(rng.IntN(pagesOf(oh))), abs: true})
				}
			}
			switch i {
			case 1:
				p.links = append(p.links, link{host: h, path: PathMissing, href: relHref(p.path, PathMissing)})
			case 2:
				p.links = append(p.links, link{host: h, path: PathPrivate, href: PathPrivate})
			case 3:
				p.links = append(p.links, link{host: h, path: PathRedirect, href: "/redirect"})
			case 4:
				if cfg.LinkBig {
					p.links = append(p.links, link{host: h, path: PathBig, href: PathBig})
				}
			case 5:
				if cfg.LinkSlow {
					p.links = append(p.links, link{host: h, path: PathSlow, href: PathSlow})
				}
			}
		}
		// With very few pages the special links hang off the index instead.
		if n < 6 {
			index.links = append(index.links,
				link{host: h, path: PathMissing, href: PathMissing},
				link{host: h, path: PathPrivate, href: PathPrivate},
				link{host: h, path: PathRedirect, href: PathRedirect},
			)
			if cfg.LinkBig {
				index.links = append(index.links, link{host: h, path: PathBig, href: PathBig})
			}
			if cfg.LinkSlow {
				index.links = append(index.links, link{host: h, path: PathSlow, href: PathSlow})
			}
		}
		g.nodes[h] = nodes
	}
	return g
}

// redirectTarget returns where host h's /redirect points: the next host's
// landing page (the same host when there is only one).
func (g *graph) redirectTarget(h int) (int, string) {
	return (h + 1) % g.hosts, PathLanding
}

// ref names one path of one host.
type ref struct {
	host int
	path string
}

// successors returns what a crawler discovers from a node: the links of an
// HTML page, the target of a redirect.
func (g *graph) successors(nd *node) []ref {
	var out []ref
	switch nd.kind {
	case kindHTML:
		for _, l := range nd.links {
			out = append(out, ref{l.host, l.path})
		}
	case kindRedirect:
		th, tp := g.redirectTarget(nd.host)
		out = append(out, ref{th, tp})
	}
	return out
}
