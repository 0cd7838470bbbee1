package websim

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The best-deep web (Config.BestDeep) is built so that a site's most
// linked pages sit deepest: a crawl that fetches the shallowest pages
// first holds none of them when a page budget stops it, and one that
// fetches the most linked first holds most. Every host serves:
//
//	/                 home (depth 0): links the 28 sections
//	/s/<s>            section (depth 1): links its 16 pages
//	/s/<s>/<k>.html   ordinary page (depth 2, 448 of them): links its
//	                  section and 3 popular pages; only its section links it
//	/top/<p>.html     popular page (depth 3, 53 of them: a tenth of the
//	                  site's 530 pages): linked by ~25 ordinary pages and 5
//	                  popular pages, links 5 popular pages
//
// The ordinary pages share out the links to popular pages evenly (25 or
// 26 each) in an order shuffled per host, so that a crawl meets a popular
// page twice after a few ordinary pages. Pages are 10–30 KB with 20–60
// links like the articles; the links beyond the site's graph are the
// page's own anchors (a table of contents) and links to the off-site
// host (references, sharing), which add no in-link to a page of the web:
// the most linked pages are the popular ones, 30 or 31 in-links each,
// against 17 for a section and 1 for an ordinary page (MostLinked computes
// it from the graph; the tests check it against the served pages).
const (
	deepSections     = 28
	deepPerSection   = 16
	deepOrdinary     = deepSections * deepPerSection
	deepPopular      = 53
	deepPages        = 1 + deepSections + deepOrdinary + deepPopular // 530
	deepPopularLinks = 3                                             // popular pages an ordinary page links
	deepAnchors      = 4                                             // most table-of-contents links of a page
	deepReferences   = 200                                           // distinct off-site references
)

// deepPopularSteps are the offsets of the popular pages a popular page
// links: p+1, p+2, p+4, p+8 and p+16 (mod deepPopular), so that every
// popular page has 5 in-links from the others.
var deepPopularSteps = [...]int{1, 2, 4, 8, 16}

// A best-deep site's pages are numbered: 0 the home, 1..deepSections the
// sections, then the ordinary pages section by section, then the popular
// pages.
const (
	deepFirstSection  = 1
	deepFirstOrdinary = deepFirstSection + deepSections
	deepFirstPopular  = deepFirstOrdinary + deepOrdinary
)

// Seeds for Web.rng of the best-deep web.
const (
	rngDeepPage uint64 = iota + 16
	rngDeepShuffle
)

// deepPath returns the path of page n of a best-deep site.
func deepPath(n int) string {
	switch {
	case n == 0:
		return "/"
	case n < deepFirstOrdinary:
		return "/s/" + strconv.Itoa(n-deepFirstSection)
	case n < deepFirstPopular:
		o := n - deepFirstOrdinary
		return "/s/" + strconv.Itoa(o/deepPerSection) + "/" + strconv.Itoa(o%deepPerSection) + ".html"
	default:
		return "/top/" + strconv.Itoa(n-deepFirstPopular) + ".html"
	}
}

// deepNode returns the page a path names on a best-deep site.
func deepNode(p string) (int, bool) {
	num := func(s string, below int) (int, bool) {
		i, err := strconv.Atoi(s)
		return i, err == nil && i >= 0 && i < below && strconv.Itoa(i) == s
	}
	if p == "/" {
		return 0, true
	}
	if rest, ok := strings.CutPrefix(p, "/top/"); ok {
		if s, ok := strings.CutSuffix(rest, ".html"); ok {
			if i, ok := num(s, deepPopular); ok {
				return deepFirstPopular + i, true
			}
		}
		return 0, false
	}
	rest, ok := strings.CutPrefix(p, "/s/")
	if !ok {
		return 0, false
	}
	sec, page, hasPage := strings.Cut(rest, "/")
	s, ok := num(sec, deepSections)
	if !ok {
		return 0, false
	}
	if !hasPage {
		return deepFirstSection + s, true
	}
	k, ok := num(strings.TrimSuffix(page, ".html"), deepPerSection)
	if !ok || !strings.HasSuffix(page, ".html") {
		return 0, false
	}
	return deepFirstOrdinary + s*deepPerSection + k, true
}

// deepDepth returns a page's depth: its fewest links from the home.
func deepDepth(n int) int {
	switch {
	case n == 0:
		return 0
	case n < deepFirstOrdinary:
		return 1
	case n < deepFirstPopular:
		return 2
	default:
		return 3
	}
}

// deepAssign returns, for each ordinary page of host h in turn,
// deepPopularLinks distinct popular pages (0..deepPopular-1): every popular
// page is taken by 25 or 26 ordinary pages, in an order shuffled per host.
func (w *Web) deepAssign(h int) []uint8 {
	slots := make([]uint8, deepOrdinary*deepPopularLinks)
	for i := range slots {
		slots[i] = uint8(i % deepPopular)
	}
	rng := w.rng(h, rngDeepShuffle, 0)
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	// A page that drew one popular page twice swaps the second for a slot
	// of another page that it can take and that can take it.
	page := func(i int) []uint8 {
		g := i / deepPopularLinks * deepPopularLinks
		return slots[g : g+deepPopularLinks]
	}
	for i := range slots {
		if !slices.Contains(page(i)[:i%deepPopularLinks], slots[i]) {
			continue
		}
		for j := range slots {
			if j/deepPopularLinks != i/deepPopularLinks && !slices.Contains(page(i), slots[j]) && !slices.Contains(page(j), slots[i]) {
				slots[i], slots[j] = slots[j], slots[i]
				break
			}
		}
	}
	return slots
}

// deepOut returns the pages of its own site that page n of host h links,
// in the order of the graph (the page's text shuffles them).
func (w *Web) deepOut(h, n int) []int {
	switch {
	case n == 0:
		out := make([]int, deepSections)
		for s := range out {
			out[s] = deepFirstSection + s
		}
		return out
	case n < deepFirstOrdinary:
		s := n - deepFirstSection
		out := make([]int, deepPerSection)
		for k := range out {
			out[k] = deepFirstOrdinary + s*deepPerSection + k
		}
		return out
	case n < deepFirstPopular:
		o := n - deepFirstOrdinary
		out := []int{deepFirstSection + o/deepPerSection}
		for _, p := range w.deep[h][o*deepPopularLinks : (o+1)*deepPopularLinks] {
			out = append(out, deepFirstPopular+int(p))
		}
		return out
	default:
		p := n - deepFirstPopular
		out := make([]int, len(deepPopularSteps))
		for i, d := range deepPopularSteps {
			out[i] = deepFirstPopular + (p+d)%deepPopular
		}
		return out
	}
}

// deepLinks returns the href and text of every link of page n of host h:
// its site's links (deepOut), then its anchors and off-site references up
// to MinLinks–MaxLinks links, shuffled.
func (w *Web) deepLinks(rng *rand.Rand, h, n int) []pageLink {
	var out []pageLink
	for _, m := range w.deepOut(h, n) {
		out = append(out, pageLink{deepPath(m), deepTitle(m)})
	}
	want := w.cfg.MinLinks + rng.IntN(w.cfg.MaxLinks-w.cfg.MinLinks+1)
	for a := 0; len(out) < want && a < deepAnchors; a++ {
		out = append(out, pageLink{"#part-" + strconv.Itoa(a+1), "part " + strconv.Itoa(a+1)})
	}
	for len(out) < want {
		out = append(out, pageLink{"http://" + w.Offsite() + "/ref/" + strconv.Itoa(rng.IntN(deepReferences)), "reference"})
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

type pageLink struct{ href, text string }

func deepTitle(n int) string {
	switch {
	case n == 0:
		return "home"
	case n < deepFirstOrdinary:
		return "section " + strconv.Itoa(n-deepFirstSection)
	case n < deepFirstPopular:
		return "page " + strconv.Itoa(n-deepFirstOrdinary)
	default:
		return "popular story " + strconv.Itoa(n-deepFirstPopular)
	}
}

// deepPage generates the HTML of page n of host h: MinPageBytes to
// MaxPageBytes, its links spread over the text as an article's are.
func (w *Web) deepPage(h, n int) []byte {
	rng := w.rng(h, rngDeepPage, uint64(n))
	size := w.cfg.MinPageBytes + rng.IntN(w.cfg.MaxPageBytes-w.cfg.MinPageBytes+1)
	links := w.deepLinks(rng, h, n)

	var b bytes.Buffer
	b.Grow(size + 4096)
	title := deepTitle(n) + ": " + w.sentence(rng, false, 5)
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>\n<meta name=\"description\" content=\"%s\">\n", title, w.sentence(rng, false, 14))
	b.WriteString(headBoilerplate)
	b.WriteString("</head>\n<body class=\"page\">\n<header class=\"site-header\"><div class=\"site-header__inner\">")
	b.WriteString(logoSVG)
	b.WriteString("</div></header>\n<main class=\"layout\"><article class=\"article\">\n<h1 class=\"article__title\">")
	b.WriteString(title)
	b.WriteString("</h1>\n")
	textBudget, text := int(float64(size)*TextShare), 0
	for block, link := 0, 0; text < textBudget || link < len(links); block++ {
		per := (textBudget - text) / (len(links) - link + 1)
		fmt.Fprintf(&b, "<div class=\"article__block\" id=\"part-%d\"><p class=\"article__text\">", block)
		for end := text + per; text < end; {
			sentence := w.sentence(rng, false, 8+rng.IntN(12))
			b.WriteString(sentence)
			b.WriteString(". ")
			text += len(sentence) + 2
		}
		if link < len(links) {
			fmt.Fprintf(&b, "See <a class=\"article__link\" href=\"%s\">%s</a>.", links[link].href, links[link].text)
			link++
		}
		b.WriteString("</p></div>\n")
		if block%4 == 3 && b.Len() < size {
			fmt.Fprintf(&b, adSlot, block, block)
		}
	}
	writeTail(&b, size, h, "")
	return b.Bytes()
}

// serveDeep answers a request of a best-deep host (robots.txt aside).
func (w *Web) serveDeep(h int, rw http.ResponseWriter, r *http.Request, p string) string {
	n, ok := deepNode(p)
	if !ok {
		http.NotFound(rw, r)
		return KindUnknown
	}
	writeHTML(rw, "utf-8", w.deepPage(h, n))
	switch deepDepth(n) {
	case 0:
		return KindIndex
	case 1:
		return KindList
	default:
		return KindArticle
	}
}

// mostLinked computes, from the best-deep web's link graph, the tenth of
// its pages with the most in-links (ties broken by host, then page
// number): a set of page indexes h*deepPages+n.
func (w *Web) mostLinked() []bool {
	total := w.cfg.Hosts * deepPages
	in := make([]int32, total)
	for h := range w.cfg.Hosts {
		for n := range deepPages {
			out := w.deepOut(h, n)
			for i, m := range out {
				// An in-link is a linking page, not a link.
				if m != n && !slices.Contains(out[:i], m) {
					in[h*deepPages+m]++
				}
			}
		}
	}
	want := total / 10
	byCount := map[int32]int{}
	for _, c := range in {
		byCount[c]++
	}
	counts := make([]int32, 0, len(byCount))
	for c := range byCount {
		counts = append(counts, c)
	}
	slices.Sort(counts)
	// The threshold: the fewest in-links a page of the set has, and how
	// many pages with exactly that many it takes.
	var threshold int32
	atThreshold, taken := 0, 0
	for i := len(counts) - 1; i >= 0; i-- {
		c := counts[i]
		if taken+byCount[c] >= want {
			threshold, atThreshold = c, want-taken
			break
		}
		taken += byCount[c]
	}
	set := make([]bool, total)
	for i, c := range in {
		switch {
		case c > threshold:
			set[i] = true
		case c == threshold && atThreshold > 0:
			set[i] = true
			atThreshold--
		}
	}
	return set
}

// MostLinked returns the resource IDs (as Resource.ID) of the tenth of the
// web's content pages with the most in-links, computed from the link
// graph; nil unless the web is best-deep (Config.BestDeep). Stats counts
// how many of them were fetched (MostLinked, MostLinkedTotal).
func (w *Web) MostLinked() []string {
	var out []string
	for i, in := range w.top {
		if in {
			out = append(out, strconv.Itoa(i/deepPages)+" "+deepPath(i%deepPages))
		}
	}
	return out
}
