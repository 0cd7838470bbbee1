package websim

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

var (
	hrefRE  = regexp.MustCompile(`href="([^"]*)"`)
	blockRE = regexp.MustCompile(`(?s)<(script|style|svg)[^>]*>.*?</(script|style|svg)>`)
	tagRE   = regexp.MustCompile(`(?s)<[^>]*>|\s{2,}`)
)

// get fetches u and returns status, content type and body.
func get(t *testing.T, c *http.Client, u string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("get %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", u, err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// norm is the resource a resolved link names, as a careful crawler keys it:
// the fragment and an empty query dropped, path parameters removed.
func norm(u *url.URL) string {
	v := *u
	v.Fragment, v.RawFragment = "", ""
	v.ForceQuery = false
	v.Scheme = strings.ToLower(v.Scheme)
	v.Path = path.Clean("/" + stripPathParams(v.Path))
	v.RawPath = ""
	return v.String()
}

// TestCrawlWholeWeb walks the generated web breadth-first like a crawler
// (robots.txt obeyed, calendar trap and off-site host left alone) and
// checks its shape: every content page reached once, the counted duplicate
// and retry requests, page sizes and link counts, GBK pages that decode.
func TestCrawlWholeWeb(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 10, Articles: 30, FirstAddr: mustAddr(t, "127.1.3.1"), Seed: 7,
		GBKEvery: 4, TrapEvery: 3, BigEvery: 5, BigBytes: 64 << 10, SlowEvery: 5, SlowDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	hosts := map[string]bool{}
	for _, h := range w.Hosts() {
		hosts[h] = true
	}
	seen := map[string]bool{}
	var queue []*url.URL
	for _, s := range w.Seeds() {
		u, _ := url.Parse(s)
		seen[norm(u)] = true
		queue = append(queue, u)
	}
	spellings := map[string]map[string]bool{} // resource -> hrefs seen for it
	var pages, gbkPages, redirects int
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		switch {
		case strings.HasPrefix(u.Path, "/private/"), strings.HasPrefix(u.Path, "/cal/"), u.Path == "/error":
			continue // disallowed, trap, retried apart
		case !hosts[u.Host]:
			continue // off-site
		}
		status, ct, body := get(t, c, u.String())
		if status >= 300 && status < 400 {
			redirects++
		}
		if !strings.HasPrefix(ct, "text/html") || status != http.StatusOK {
			continue
		}
		if strings.Contains(u.Path, "/news/") || u.Path == "/" || u.Path == "/list" {
			pages++
		}
		if strings.Contains(ct, "gbk") || strings.Contains(string(body[:min(len(body), 200)]), `charset="gbk"`) {
			dec, err := simplifiedchinese.GBK.NewDecoder().Bytes(body)
			if err != nil {
				t.Fatalf("%s: not GBK: %v", u, err)
			}
			body = dec
			gbkPages++
		}
		links := hrefRE.FindAllSubmatch(body, -1)
		if strings.Contains(u.Path, "/news/") {
			if len(body) < 10<<10 || len(body) > 31<<10 {
				t.Errorf("%s: %d bytes, want 10 to 30 KiB (and a sentence)", u, len(body))
			}
			if n := len(links) - 4; n < 20 || n > 60 { // 4 links of header and footer
				t.Errorf("%s: %d links in the text, want 20 to 60", u, n)
			}
			text := tagRE.ReplaceAll(blockRE.ReplaceAll(body, nil), nil)
			if share := float64(len(text)) / float64(len(body)); share < TextShare-0.1 || share > TextShare+0.1 {
				t.Errorf("%s: visible text is %.0f%% of the page, want about %.0f%%", u, 100*share, 100*TextShare)
			}
		}
		for _, m := range links {
			href := string(m[1])
			ref, err := u.Parse(href)
			if err != nil {
				t.Fatalf("%s: bad href %q: %v", u, href, err)
			}
			key := norm(ref)
			if strings.Contains(key, "/news/") {
				if spellings[key] == nil {
					spellings[key] = map[string]bool{}
				}
				spellings[key][href] = true
			}
			if !seen[key] {
				seen[key] = true
				queue = append(queue, ref)
			}
		}
	}
	if pages != w.Pages() {
		t.Errorf("crawled %d content pages, want Pages() = %d", pages, w.Pages())
	}
	if gbkPages == 0 || redirects == 0 {
		t.Errorf("%d GBK pages and %d redirects crawled, want some of each", gbkPages, redirects)
	}
	most := 0
	for _, hrefs := range spellings {
		most = max(most, len(hrefs))
	}
	if most < 8 {
		t.Errorf("an article is linked in at most %d spellings, want at least 8", most)
	}

	s := settledStats(t, w)
	if s.Duplicates != 0 || s.Retries != 0 || s.Offsite != 0 || s.Disallowed != 0 || s.Trap != 0 {
		t.Errorf("a careful crawl: %+v, want no duplicate, retry, off-site, disallowed or trap request", s)
	}
	if s.Pages != s.PagesTotal || s.Coverage() != 1 {
		t.Errorf("stats: %d of %d pages, want all", s.Pages, s.PagesTotal)
	}
	inTimeline := 0
	for _, n := range s.PageTimeline {
		inTimeline += n
	}
	if inTimeline != s.Pages {
		t.Errorf("page timeline holds %d pages, want the %d fetched", inTimeline, s.Pages)
	}

	// The counters the benchmark reads.
	story := w.Seeds()[0] + "news/2021/story-1.html"
	get(t, c, story)
	get(t, c, strings.Replace(story, "story-1", "story%2D1", 1)+"?")
	get(t, c, w.Seeds()[0]+"error")
	get(t, c, w.Seeds()[0]+"error")
	get(t, c, "http://"+w.Offsite()+"/ref/0/0")
	get(t, c, w.Seeds()[0]+"robots.txt")
	get(t, c, w.Seeds()[0]+"robots.txt")
	get(t, c, w.Seeds()[2]+"cal/2026/11")
	s = settledStats(t, w)
	want := Stats{Duplicates: 2, Retries: 1, Offsite: 1, RobotsMore: 1, Trap: 1}
	if s.Duplicates != want.Duplicates || s.Retries != want.Retries || s.Offsite != want.Offsite ||
		s.RobotsMore != want.RobotsMore || s.Trap != want.Trap {
		t.Errorf("after repeats: duplicates %d retries %d offsite %d robots_more %d trap %d, want %+v",
			s.Duplicates, s.Retries, s.Offsite, s.RobotsMore, s.Trap, want)
	}
}

func TestBigSlowAndErrors(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 2, Articles: 3, FirstAddr: mustAddr(t, "127.1.4.1"),
		BigEvery: 1, BigBytes: 1 << 20, SlowEvery: 1, SlowDelay: 100 * time.Millisecond, TrapEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := &http.Client{Timeout: 5 * time.Second}
	base := w.Seeds()[1]
	tests := []struct {
		path   string
		status int
		ctype  string
		size   int // 0: any
	}{
		{"big", 200, "text/html", 1 << 20},
		{"slow", 200, "text/html", 0},
		{"error", 500, "text/plain", 0},
		{"gone/3", 404, "text/plain", 0},
		{"files/report-1.pdf", 200, "application/pdf", 24 << 10},
		{"cal/2026/11", 404, "text/plain", 0}, // TrapEvery < 0: no trap
		{"news/2020/story-0.html;jsessionid=ABCDEF", 200, "text/html", 0},
		{"news/2021/story-0.html", 404, "text/plain", 0}, // wrong year
		{"list?page=9", 404, "text/plain", 0},
		{"r/2", 200, "text/html", 0}, // two hops, followed by the client
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			start := time.Now()
			status, ct, body := get(t, c, base+tt.path)
			if status != tt.status || !strings.HasPrefix(ct, tt.ctype) {
				t.Errorf("status %d %q, want %d %q", status, ct, tt.status, tt.ctype)
			}
			if tt.size > 0 && len(body) != tt.size {
				t.Errorf("%d bytes, want %d", len(body), tt.size)
			}
			if tt.path == "slow" && time.Since(start) < 100*time.Millisecond {
				t.Errorf("answered after %v, want the slow delay", time.Since(start))
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"not loopback", Config{FirstAddr: mustAddr(t, "10.0.0.1")}, "loopback"},
		{"leaves loopback", Config{Hosts: 10, FirstAddr: mustAddr(t, "127.255.255.250")}, "leave 127.0.0.0/8"},
		{"links", Config{MinLinks: 10, MaxLinks: 5}, "links 10..5"},
		{"pages", Config{MinPageBytes: 100}, "page bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Start(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestConnectionsCounted: the web counts the connections a client opens,
// so that the benchmark shows whether the crawler reuses them.
func TestConnectionsCounted(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 1, Articles: 2, FirstAddr: mustAddr(t, "127.1.4.9")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	keepAlive := &http.Client{Timeout: 5 * time.Second}
	get(t, keepAlive, w.Seeds()[0])
	get(t, keepAlive, w.Seeds()[0]+"robots.txt")
	if n := w.Stats().Connections; n != 1 {
		t.Errorf("two requests on a keep-alive client opened %d connections, want 1", n)
	}
	closing := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	get(t, closing, w.Seeds()[0])
	get(t, closing, w.Seeds()[0])
	if n := w.Stats().Connections; n != 3 {
		t.Errorf("after two requests without keep-alive: %d connections, want 3", n)
	}
}

// settledStats returns the stats once every request received so far has
// been recorded (a client reads an answer before its handler returns).
func settledStats(t *testing.T, w *Web) Stats {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for w.inflight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still being answered after 5s", w.inflight.Load())
		}
		runtime.Gosched()
	}
	return w.Stats()
}

// TestOnlyItsAddresses: the web listens on the wildcard address but
// answers only at its hosts' addresses; a connection to any other address
// of the machine is closed unanswered, and not counted.
func TestOnlyItsAddresses(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 2, Articles: 2, FirstAddr: mustAddr(t, "127.1.4.20")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	if status, _, _ := get(t, c, "http://"+w.Offsite()+"/ref/0/0"); status != http.StatusOK {
		t.Errorf("the off-site host answered %d, want 200", status)
	}
	_, port, _ := strings.Cut(w.Hosts()[0], ":")
	for _, addr := range []string{"127.1.4.19", "127.1.4.23", "127.0.0.1"} { // before, after the range; another address
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+":"+port+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s answered %s, want the connection closed", addr, resp.Status)
		}
	}
	if n := w.Stats().Connections; n != 1 {
		t.Errorf("%d connections counted, want only the off-site host's", n)
	}
}

// TestCalendarLinks: every page of the calendar trap links the months
// next to it, so a crawl that follows them never runs out; a grid
// calendar (Config.TrapGrid) links the same month of the years next to
// it too.
func TestCalendarLinks(t *testing.T) {
	tests := []struct {
		name  string
		grid  bool
		month string
		want  []string
	}{
		{"entry", false, "2026/11", []string{"/cal/2026/10", "/cal/2026/12", "/"}},
		{"across a year's end", false, "2027/1", []string{"/cal/2026/12", "/cal/2027/2", "/"}},
		{"path parameter", false, "1999/12;jsessionid=A", []string{"/cal/1999/11", "/cal/2000/1", "/"}},
		{"grid entry", true, "2026/11", []string{"/cal/2026/10", "/cal/2026/12", "/cal/2025/11", "/cal/2027/11", "/"}},
		{"grid across a year's start", true, "2026/1", []string{"/cal/2025/12", "/cal/2026/2", "/cal/2025/1", "/cal/2027/1", "/"}},
	}
	line, err := Start(t.Context(), Config{Hosts: 1, Articles: 2, FirstAddr: mustAddr(t, "127.1.6.1"), TrapEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer line.Close()
	grid, err := Start(t.Context(), Config{Hosts: 1, Articles: 2, FirstAddr: mustAddr(t, "127.1.6.4"), TrapEvery: 1, TrapGrid: true})
	if err != nil {
		t.Fatal(err)
	}
	defer grid.Close()
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := line
			if tt.grid {
				w = grid
			}
			status, _, body := get(t, c, w.Seeds()[0]+"cal/"+tt.month)
			if status != http.StatusOK {
				t.Fatalf("status %d, want 200", status)
			}
			var got []string
			for _, m := range hrefRE.FindAllSubmatch(body, -1) {
				got = append(got, string(m[1]))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("links %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTrapPastSecondHop: the web counts every request of a calendar
// page in Stats.Trap, and those of months more than one link away from
// the entry the articles link to (past a crawl's second hop into the
// trap) in Stats.TrapDeep as well. On a grid calendar a link is a month
// or a year. A month requested again counts again.
func TestTrapPastSecondHop(t *testing.T) {
	tests := []struct {
		name   string
		grid   bool
		months []string // requested in this order
		deep   int
	}{
		{"the entry and its neighbours", false, []string{"2026/11", "2026/10", "2026/12"}, 0},
		{"two steps", false, []string{"2026/11", "2026/12", "2027/1", "2026/9"}, 2},
		{"a year from the entry", false, []string{"2025/11", "2027/11"}, 2},
		{"repeated", false, []string{"2027/1", "2027/1;jsessionid=A", "2026/12", "2026/12"}, 2},
		{"grid: a year from the entry", true, []string{"2026/11", "2026/12", "2027/1", "2025/11"}, 1},
		{"grid: two steps", true, []string{"2027/10", "2025/12", "2028/11", "2026/9", "2027/11", "2026/10"}, 4},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Start(t.Context(), Config{Hosts: 1, Articles: 2, TrapEvery: 1, TrapGrid: tt.grid,
				FirstAddr: mustAddr(t, fmt.Sprintf("127.1.6.%d", 10+2*i))})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			c := &http.Client{Timeout: 5 * time.Second}
			defer c.CloseIdleConnections()
			for _, m := range tt.months {
				if status, _, _ := get(t, c, w.Seeds()[0]+"cal/"+m); status != http.StatusOK {
					t.Fatalf("%s: status %d, want 200", m, status)
				}
			}
			if status, _, _ := get(t, c, w.Seeds()[0]+"cal/2031/13"); status != http.StatusNotFound {
				t.Errorf("month 13: status %d, want 404", status)
			}
			s := settledStats(t, w)
			if s.Trap != len(tt.months) || s.TrapDeep != tt.deep {
				t.Errorf("trap %d, trap_deep %d; want %d and %d", s.Trap, s.TrapDeep, len(tt.months), tt.deep)
			}
		})
	}
}

// TestTrapHosts: TrapHosts counts the hosts that serve the calendar, as a
// crawler finds them.
func TestTrapHosts(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 12, Articles: 1, TrapEvery: 4, FirstAddr: mustAddr(t, "127.1.7.1")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	serving := 0
	for _, seed := range w.Seeds() {
		if status, _, _ := get(t, c, seed+"cal/2026/11"); status == http.StatusOK {
			serving++
		}
	}
	if serving != 3 || w.TrapHosts() != serving {
		t.Errorf("TrapHosts() = %d, %d of 12 hosts serve the calendar; want 3 and 3", w.TrapHosts(), serving)
	}
}

// TestFixedPort: a web started on a given port serves every host there,
// so that back-to-back benchmarks share the fetch partitions out alike
// (a host's partition is a function of its host:port); a port out of
// range is refused.
func TestFixedPort(t *testing.T) {
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port // free a moment ago
	ln.Close()
	w, err := Start(t.Context(), Config{Hosts: 2, Articles: 2, FirstAddr: mustAddr(t, "127.1.4.40"), Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := []string{fmt.Sprintf("127.1.4.40:%d", port), fmt.Sprintf("127.1.4.41:%d", port)}
	if got := w.Hosts(); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("hosts %v, want %v", got, want)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	defer c.CloseIdleConnections()
	if status, _, _ := get(t, c, w.Seeds()[1]); status != http.StatusOK {
		t.Errorf("the second host's seed answered %d, want 200", status)
	}
	if _, err := Start(t.Context(), Config{Port: 70000}); err == nil || !strings.Contains(err.Error(), "port 70000") {
		t.Errorf("Start on port 70000: %v, want an error naming the port", err)
	}
}
