package websim

import (
	"math/bits"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"testing"
	"time"
)

// deepCrawl is what a careful walk of a best-deep web saw, from the served
// pages alone: every page's depth from its host's home and the distinct
// pages of the web each one links, in the order fetched.
type deepCrawl struct {
	depth map[string]int
	out   map[string][]string // resource ID → IDs of the other pages of the web it links
	order []string            // IDs in the order fetched (breadth-first)
}

// walkDeep fetches every page of w breadth-first from the seeds, reads its
// links, and checks each page's size and link count.
func walkDeep(t *testing.T, w *Web) deepCrawl {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	hostIdx := map[string]int{}
	for i, h := range w.Hosts() {
		hostIdx[h] = i
	}
	id := func(u *url.URL) (string, bool) {
		h, ok := hostIdx[u.Host]
		return strconv.Itoa(h) + " " + path.Clean("/"+u.Path), ok
	}
	d := deepCrawl{depth: map[string]int{}, out: map[string][]string{}}
	var queue []*url.URL
	for _, s := range w.Seeds() {
		u, _ := url.Parse(s)
		k, _ := id(u)
		d.depth[k] = 0
		queue = append(queue, u)
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		k, _ := id(u)
		status, _, body := get(t, c, u.String())
		if status != http.StatusOK {
			t.Fatalf("%s: status %d", u, status)
		}
		d.order = append(d.order, k)
		if len(body) < w.cfg.MinPageBytes || len(body) > w.cfg.MaxPageBytes+1024 {
			t.Errorf("%s: %d bytes, want %d to %d", u, len(body), w.cfg.MinPageBytes, w.cfg.MaxPageBytes)
		}
		links := hrefRE.FindAllSubmatch(body, -1)
		if n := len(links); n < w.cfg.MinLinks || n > max(w.cfg.MaxLinks, deepSections) {
			t.Errorf("%s: %d links, want %d to %d", u, n, w.cfg.MinLinks, w.cfg.MaxLinks)
		}
		for _, m := range links {
			ref, err := u.Parse(string(m[1]))
			if err != nil {
				t.Fatalf("%s: bad href %q: %v", u, m[1], err)
			}
			to, ok := id(ref)
			if !ok || to == k || slices.Contains(d.out[k], to) {
				continue // off-site, the page itself (an anchor), or linked again
			}
			d.out[k] = append(d.out[k], to)
			if _, seen := d.depth[to]; !seen {
				d.depth[to] = d.depth[k] + 1
				queue = append(queue, ref)
			}
		}
	}
	return d
}

// TestBestDeepShape walks a best-deep web and checks, from the served
// pages, what it is built for: the tenth of its pages with the most
// in-links is MostLinked (the popular pages, and nothing ties with them),
// they are the deepest pages of their sites, and Stats counts them.
func TestBestDeepShape(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 3, FirstAddr: mustAddr(t, "127.1.5.1"), Seed: 5, BestDeep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d := walkDeep(t, w)
	if len(d.order) != w.Pages() || w.Pages() != 3*deepPages {
		t.Fatalf("walked %d pages, want Pages() = %d = 3 × %d", len(d.order), w.Pages(), deepPages)
	}
	if ids := w.ContentIDs(); !slices.Equal(slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(d.order))) {
		t.Errorf("ContentIDs differ from the pages walked")
	}

	in := map[string]int{}
	for _, tos := range d.out {
		for _, to := range tos {
			in[to]++
		}
	}
	byIn := slices.Clone(d.order)
	slices.SortStableFunc(byIn, func(a, b string) int { return in[b] - in[a] })
	top := byIn[:len(byIn)/10]
	most := w.MostLinked()
	if !slices.Equal(slices.Sorted(slices.Values(top)), slices.Sorted(slices.Values(most))) {
		t.Errorf("the tenth most linked of the served pages differ from MostLinked():\n%v\n%v", top, most)
	}
	if last, next := in[top[len(top)-1]], in[byIn[len(top)]]; last <= next {
		t.Errorf("the set's fewest in-links %d tie or trail the next page's %d", last, next)
	}
	maxDepth := 0
	for _, dep := range d.depth {
		maxDepth = max(maxDepth, dep)
	}
	for _, id := range most {
		if d.depth[id] != maxDepth {
			t.Errorf("%s: depth %d, want the site's deepest, %d", id, d.depth[id], maxDepth)
		}
	}
	t.Logf("%d pages, %d most linked (in-links %d to %d; next %d) at depth %d", len(d.order), len(most),
		in[top[len(top)-1]], in[top[0]], in[byIn[len(top)]], maxDepth)

	s := settledStats(t, w)
	if s.MostLinked != len(most) || s.MostLinkedTotal != len(most) || s.Pages != w.Pages() {
		t.Errorf("stats: most linked %d of %d, pages %d; want %d of %d and %d", s.MostLinked, s.MostLinkedTotal, s.Pages,
			len(most), len(most), w.Pages())
	}
	get(t, &http.Client{}, "http://"+w.Hosts()[1]+"/top/3.html")
	if s := settledStats(t, w); s.MostLinked != len(most) || s.Duplicates != 1 {
		t.Errorf("a repeated request: most linked %d, duplicates %d; want %d and 1", s.MostLinked, s.Duplicates, len(most))
	}
}

// TestBestDeepBudget plays two crawl orders over a best-deep site's link
// graph (as served) with a budget of a fifth of its pages: breadth-first
// holds none of the most linked pages; best-first, by in-links found so
// far (⌊log2 n⌋, then depth, then first found, as libs/priority ranks
// them), holds at least 80 % of them.
func TestBestDeepBudget(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 2, FirstAddr: mustAddr(t, "127.1.6.1"), Seed: 6, BestDeep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	d := walkDeep(t, w)
	most := map[string]bool{}
	for _, id := range w.MostLinked() {
		most[id] = true
	}
	for h, seed := range []string{"0 /", "1 /"} {
		budget := deepPages / 5
		held := func(order []string) int {
			n := 0
			for _, id := range order[:budget] {
				if most[id] {
					n++
				}
			}
			return n
		}
		bfs := func() []string {
			var out []string
			for _, id := range d.order {
				if id[:len(seed)-1] == seed[:len(seed)-1] {
					out = append(out, id)
				}
			}
			return out
		}()
		best := bestFirst(d, seed, budget)
		want := deepPopular * 8 / 10
		if got := held(bfs); got != 0 {
			t.Errorf("host %d: breadth-first holds %d of %d most linked pages, want 0", h, got, deepPopular)
		}
		if got := held(best); got < want {
			t.Errorf("host %d: best-first holds %d of %d most linked pages, want at least %d", h, got, deepPopular, want)
		}
		t.Logf("host %d, budget %d of %d pages: breadth-first holds %d, best-first %d of the %d most linked",
			h, budget, deepPages, held(bfs), held(best), deepPopular)
	}
}

// bestFirst returns the first n pages a best-first crawl from seed fetches:
// each step the known page with the most in-links from the pages fetched
// (by ⌊log2⌋), then the shallowest, then the first found.
func bestFirst(d deepCrawl, seed string, n int) []string {
	type known struct {
		in, depth, found int
		done             bool
	}
	pages := map[string]*known{seed: {depth: 0}}
	var out []string
	for len(out) < n {
		var next string
		var best *known
		for id, k := range pages {
			if k.done {
				continue
			}
			if best == nil || better(k.in, k.depth, k.found, best.in, best.depth, best.found) {
				next, best = id, k
			}
		}
		if best == nil {
			break
		}
		best.done = true
		out = append(out, next)
		for _, to := range d.out[next] {
			k, ok := pages[to]
			if !ok {
				k = &known{depth: best.depth + 1, found: len(pages)}
				pages[to] = k
			}
			k.in++
		}
	}
	return out
}

func better(in, depth, found, in2, depth2, found2 int) bool {
	p, p2 := bits.Len(uint(in)), bits.Len(uint(in2)) // ⌊log2 n⌋+1, 0 for none
	switch {
	case p != p2:
		return p > p2
	case depth != depth2:
		return depth < depth2
	default:
		return found < found2
	}
}

// TestDeepPaths: every page's path names it, and no other path names a
// page.
func TestDeepPaths(t *testing.T) {
	for n := range deepPages {
		if m, ok := deepNode(deepPath(n)); !ok || m != n {
			t.Errorf("deepNode(%q) = %d, %v; want %d", deepPath(n), m, ok, n)
		}
	}
	for _, p := range []string{"", "/s/", "/s/28", "/s/01", "/s/-1", "/s/0/16.html", "/s/0/3", "/s/0/3.htm", "/top/53.html", "/top/3", "/top/", "/x"} {
		if n, ok := deepNode(p); ok {
			t.Errorf("deepNode(%q) = %d, want no page", p, n)
		}
	}
}
