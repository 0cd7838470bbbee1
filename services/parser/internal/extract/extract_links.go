package extract

import (
	"strings"

	"github.com/PuerkitoBio/goquery"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// baseURL is the document's base URL: the first <base href>, resolved
// against the page URL, or the page URL.
func baseURL(root *goquery.Selection, page string) string {
	href, ok := root.Find("base[href]").First().Attr("href")
	if !ok {
		return page
	}
	b, err := urlcanon.Resolve(page, href)
	if err != nil {
		return page
	}
	return b
}

// linkSources are the elements that carry links, in one selector group so
// that cascadia matches them in document order.
const linkSources = "a[href], area[href], frame[src], iframe[src], link[href], body[background], applet[code], meta[http-equiv][content]"

// links extracts the page's outlinks (none under nofollow, but the
// canonical link is still returned).
func links(root *goquery.Selection, page string, opts Options, nofollow bool) ([]Link, map[string]int, string) {
	base := baseURL(root, page)
	if opts.Results != nil {
		return resultLinks(root, base, page, opts, nofollow)
	}
	var raw []rawLink
	root.Find(linkSources).Each(func(_ int, s *goquery.Selection) {
		n := s.Get(0)
		if n.Namespace != "" || inert(n) { // inside SVG/MathML or <template>
			return
		}
		switch n.DataAtom {
		case atom.A, atom.Area:
			ref, _ := s.Attr("href")
			rel, _ := s.Attr("rel")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref, rel: normRel(rel), anchor: anchorText(s, n)})
		case atom.Frame, atom.Iframe:
			ref, _ := s.Attr("src")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref, anchor: anchorText(s, n)})
		case atom.Link:
			ref, _ := s.Attr("href")
			rel, _ := s.Attr("rel")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref, rel: normRel(rel)})
		case atom.Body:
			ref, _ := s.Attr("background")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: ref})
		case atom.Applet:
			code, _ := s.Attr("code")
			cb, hasCB := s.Attr("codebase")
			raw = append(raw, rawLink{tag: n.DataAtom, ref: code, codebase: cb, hasCB: hasCB})
		case atom.Meta:
			equiv, _ := s.Attr("http-equiv")
			if !strings.EqualFold(strings.TrimSpace(equiv), "refresh") {
				return
			}
			content, _ := s.Attr("content")
			if ref, ok := RefreshURL(content); ok {
				raw = append(raw, rawLink{tag: n.DataAtom, ref: ref})
			}
		}
	})
	return resolveLinks(raw, base, page, opts, nofollow)
}

// resultLinks extracts the links of a search engine result page: those of
// the elements Options.Results matches.
func resultLinks(root *goquery.Selection, base, page string, opts Options, nofollow bool) ([]Link, map[string]int, string) {
	resolver, err := urlcanon.NewResolver(base)
	if err != nil {
		return nil, map[string]int{DropInvalid: 1}, ""
	}
	resolver.WithCache(opts.Resolved)
	k := newLinkSink(page, opts.MaxOutlinks, 0)
	root.FindMatcher(opts.Results).Each(func(_ int, s *goquery.Selection) {
		if goquery.NodeName(s) != "a" {
			s = s.Find("a[href]").First()
		}
		n := s.Get(0)
		if n == nil || n.Namespace != "" {
			return
		}
		ref, ok := s.Attr("href")
		if !ok {
			return
		}
		rel, _ := s.Attr("rel")
		if nofollow {
			k.drop(DropNoFollow)
			return
		}
		if k.add(resolver, ref, Link{Rel: normRel(rel), Tag: "a"}) {
			k.out[len(k.out)-1].Anchor = anchorText(s, n)
		}
	})
	return k.links(), k.dropped, ""
}

// inert reports whether n is inside content that is not part of the
// rendered document (<template> contents).
func inert(n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.DataAtom == atom.Template {
			return true
		}
	}
	return false
}

// anchorText is the text a link is known by: the text of an <a> (or the alt
// text of its first image), the alt of an <area>, the title of a frame.
func anchorText(s *goquery.Selection, n *html.Node) string {
	switch n.DataAtom {
	case atom.A:
		if a := collapse(s.Nodes, maxAnchorBytes); a != "" {
			return a
		}
		return imageAlt(s)
	case atom.Area:
		alt, _ := s.Attr("alt")
		return collapseString(alt, maxAnchorBytes)
	default:
		t, _ := s.Attr("title")
		return collapseString(t, maxAnchorBytes)
	}
}

func imageAlt(s *goquery.Selection) string {
	var alt string
	s.Find("img[alt]").EachWithBreak(func(_ int, img *goquery.Selection) bool {
		a, _ := img.Attr("alt")
		alt = collapseString(a, maxAnchorBytes)
		return alt == ""
	})
	return alt
}
