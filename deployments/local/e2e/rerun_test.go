package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// editedSite is a site that is edited between crawls: an index linking
// stable pages (each linking a deeper one), a page that changes in the
// second edition (and then links a new page) and a page that is deleted
// in it (404). Every answer has a validator (ETag, or Last-Modified for
// the deep pages) and a matching conditional request is answered 304. It
// records every page request of each edition.
type editedSite struct {
	base    string
	stable  int
	mu      sync.Mutex
	edition int
	reqs    map[int][]siteRequest // edition -> requests
}

// siteRequest is one page request and its answer.
type siteRequest struct {
	path        string
	conditional bool // If-None-Match or If-Modified-Since sent
	status      int
}

const deepLastModified = "Thu, 01 Jan 2026 00:00:00 GMT"

func startEditedSite(t *testing.T, ip string, stable int) *editedSite {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &editedSite{base: "http://" + ln.Addr().String(), stable: stable, edition: 1, reqs: make(map[int][]siteRequest)}
	srv := &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	return s
}

// edit moves the site to its next edition.
func (s *editedSite) edit() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.edition++
}

// requests returns the page requests of an edition.
func (s *editedSite) requests(edition int) []siteRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs[edition])
}

// page is what the site serves at path in edition: its text, links and
// validators, ok false for a page not found. Editions after the second
// are the second.
func (s *editedSite) page(path string, edition int) (text string, links []string, etag, lastModified string, ok bool) {
	switch {
	case path == "/":
		for i := range s.stable {
			links = append(links, fmt.Sprintf("/stable/%d", i))
		}
		return "the index", append(links, "/mutable", "/doomed"), `"index"`, "", true
	case strings.HasPrefix(path, "/stable/"):
		return "stable page " + path, []string{strings.Replace(path, "/stable/", "/deep/", 1)}, `"` + path + `"`, "", true
	case strings.HasPrefix(path, "/deep/"):
		return "deep page " + path, nil, "", deepLastModified, true
	case path == "/mutable" && edition == 1:
		return "mutable page, first edition", nil, `"mutable-1"`, "", true
	case path == "/mutable":
		return "mutable page, second edition", []string{"/fresh"}, `"mutable-2"`, "", true
	case path == "/doomed" && edition == 1:
		return "a page about to be deleted", nil, `"doomed"`, "", true
	case path == "/fresh" && edition > 1:
		return "a page new in the second edition", nil, `"fresh"`, "", true
	}
	return "", nil, "", "", false
}

func (s *editedSite) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		return
	}
	inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
	s.mu.Lock()
	edition := s.edition
	text, links, etag, lm, ok := s.page(r.URL.Path, edition)
	status := http.StatusOK
	switch {
	case !ok:
		status = http.StatusNotFound
	case (inm != "" && inm == etag) || (inm == "" && ims != "" && ims == lm):
		status = http.StatusNotModified
	}
	s.reqs[edition] = append(s.reqs[edition], siteRequest{path: r.URL.Path, conditional: inm != "" || ims != "", status: status})
	s.mu.Unlock()
	if status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if etag != "" {
		w.Header().Set("ETag", etag)
	}
	if lm != "" {
		w.Header().Set("Last-Modified", lm)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s</title></head><body><p>%s</p>", r.URL.Path, text)
	for _, l := range links {
		fmt.Fprintf(&b, `<a href="%s%s">%s</a> `, s.base, l, l)
	}
	b.WriteString("</body></html>")
	fmt.Fprint(w, b.String())
}

// TestRerunAsksOnlyWhatChanged runs the launcher three times on the same
// seeds, the site edited between the first two runs. The first run
// crawls the site. The second starts a new crawl that re-crawls the first
// (it says so): every page the first fetched is asked for once,
// conditionally; the unchanged ones, deep pages included (their parents
// answered 304, so nothing was parsed to reach them), answer 304 and are
// carried over; the changed page is fetched in full and its new link
// followed; the deleted page's 404 is recorded; the summary counts the
// unchanged pages. The third run, on an unchanged site, makes only
// conditional requests, all answered 304, and its documents export holds
// every page with the text of the crawl that last fetched it in full (a
// chain of two re-crawls).
func TestRerunAsksOnlyWhatChanged(t *testing.T) {
	const stable = 3
	ctx, cancel := context.WithTimeout(t.Context(), 280*time.Second)
	defer cancel()
	site := startEditedSite(t, "127.0.0.249", stable)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	ch := chtest.Config(t)
	args := []string{"--allow-private", "--delay", e2eDelay.String(), "--partitions", "8",
		"--data-dir", dataDir, "--timeout", "100s",
		"--clickhouse-addr", ch.Addr[0], "--clickhouse-database", ch.Database, "--seed", site.base + "/"}
	unchanged := []string{"/"}
	for i := range stable {
		unchanged = append(unchanged, fmt.Sprintf("/stable/%d", i), fmt.Sprintf("/deep/%d", i))
	}

	// The first crawl: every page once, in full.
	first, err := runLauncher(t, ctx, args, filepath.Join(dir, "out1.txt"), nil)
	if err != nil {
		t.Fatalf("first run: %v\n%s\nservice logs:\n%s", err, first, tails(dataDir))
	}
	id1 := crawlIDIn(t, first, "new crawl ")
	reqs1 := site.requests(1)
	if len(reqs1) != len(unchanged)+2 {
		t.Errorf("first run: %d page requests %v, want %d", len(reqs1), reqs1, len(unchanged)+2)
	}
	for _, r := range reqs1 {
		if r.conditional || r.status != http.StatusOK {
			t.Errorf("first run: %+v, want an unconditional request answered 200", r)
		}
	}

	// The second crawl, after the edit.
	site.edit()
	second, err := runLauncher(t, ctx, args, filepath.Join(dir, "out2.txt"), nil)
	if err != nil {
		t.Fatalf("second run: %v\n%s\nservice logs:\n%s", err, second, tails(dataDir))
	}
	t.Logf("second run:\n%s", second)
	id2 := crawlIDIn(t, second, "new crawl ")
	if id2 == id1 || !strings.Contains(second, "re-crawls crawl "+id1) {
		t.Errorf("second run does not say it starts a new crawl re-crawling %s:\n%s", id1, second)
	}
	byPath := make(map[string][]siteRequest)
	for _, r := range site.requests(2) {
		byPath[r.path] = append(byPath[r.path], r)
	}
	want := map[string]siteRequest{
		"/mutable": {path: "/mutable", conditional: true, status: http.StatusOK},
		"/doomed":  {path: "/doomed", conditional: true, status: http.StatusNotFound},
		"/fresh":   {path: "/fresh", conditional: false, status: http.StatusOK},
	}
	for _, p := range unchanged {
		want[p] = siteRequest{path: p, conditional: true, status: http.StatusNotModified}
	}
	for p, w := range want {
		if got := byPath[p]; len(got) != 1 || got[0] != w {
			t.Errorf("second run: %s requested %+v, want once: %+v", p, got, w)
		}
	}
	for p, got := range byPath {
		if _, ok := want[p]; !ok {
			t.Errorf("second run: unexpected requests %+v", got)
		}
	}
	if line := fmt.Sprintf("unchanged   %d pages answered 304 (not fetched again); %d documents carried over from crawl %s",
		len(unchanged), len(unchanged), id1); !strings.Contains(second, line) {
		t.Errorf("second run's summary lacks %q", line)
	}

	store, err := chstore.Open(ctx, ch, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var status uint16
	if err := store.Conn().QueryRow(ctx, "SELECT status FROM fetch_log FINAL WHERE crawl_id = ? AND url = ?", id2, site.base+"/doomed").
		Scan(&status); err != nil || status != http.StatusNotFound {
		t.Errorf("the deleted page in crawl %s's fetch log: status %d (%v), want 404", id2, status, err)
	}

	// The third crawl: nothing changed since the second (an edition of
	// its own, to count its requests apart).
	site.edit()
	third, err := runLauncher(t, ctx, args, filepath.Join(dir, "out3.txt"), nil)
	if err != nil {
		t.Fatalf("third run: %v\n%s\nservice logs:\n%s", err, third, tails(dataDir))
	}
	id3 := crawlIDIn(t, third, "new crawl ")
	if !strings.Contains(third, "re-crawls crawl "+id2) {
		t.Errorf("third run does not say it re-crawls %s:\n%s", id2, third)
	}
	reqs3 := site.requests(3)
	if len(reqs3) != len(unchanged)+2 {
		t.Errorf("third run: %d page requests %+v, want %d (the pages of the second crawl but the deleted one)", len(reqs3), reqs3, len(unchanged)+2)
	}
	for _, r := range reqs3 {
		if !r.conditional || r.status != http.StatusNotModified {
			t.Errorf("third run: %+v, want a conditional request answered 304", r)
		}
	}

	// The third crawl's documents: every page, with the text of the crawl
	// that last fetched it in full.
	var buf bytes.Buffer
	if _, err := chexport.Export(ctx, store.Conn(), chexport.Request{CrawlID: id3, Table: chexport.Documents, Format: chexport.JSONL}, &buf); err != nil {
		t.Fatalf("export crawl %s: %v", id3, err)
	}
	texts := make(map[string]string)
	dec := json.NewDecoder(&buf)
	for dec.More() {
		var d chexport.DocumentRow
		if err := dec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		if d.CrawlID != id3 {
			t.Errorf("exported document %s of crawl %s, want %s", d.URL, d.CrawlID, id3)
		}
		texts[strings.TrimPrefix(d.URL, site.base)] = d.Text
	}
	for _, p := range append(unchanged, "/mutable", "/fresh") {
		text, _, _, _, _ := site.page(p, 2)
		if !strings.Contains(texts[p], text) {
			t.Errorf("crawl %s's document %s: text %q, want %q", id3, p, texts[p], text)
		}
	}
	if len(texts) != len(unchanged)+2 {
		t.Errorf("crawl %s exported %d documents %v, want %d", id3, len(texts), texts, len(unchanged)+2)
	}
}
