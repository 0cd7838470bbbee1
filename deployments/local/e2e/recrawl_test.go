package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// changingSite serves an index, pages whose content (and ETag) changes on
// every request, and pages that never change and answer a matching
// If-None-Match or If-Modified-Since with 304. It records every page
// request.
type changingSite struct {
	srv  *http.Server
	base string
	n    int // changing and stable pages each

	mu   sync.Mutex
	hits map[string]*pageHits
}

type pageHits struct {
	requests    int
	conditional int // requests with If-None-Match or If-Modified-Since
	notModified int // answered 304
}

const stableLastModified = "Thu, 01 Jan 2026 00:00:00 GMT"

func startChangingSite(t *testing.T, ip string, n int) *changingSite {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &changingSite{base: "http://" + ln.Addr().String(), n: n, hits: make(map[string]*pageHits)}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = s.srv.Close()
		<-done
	})
	return s
}

func (s *changingSite) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		return
	}
	s.mu.Lock()
	h := s.hits[r.URL.Path]
	if h == nil {
		h = &pageHits{}
		s.hits[r.URL.Path] = h
	}
	h.requests++
	inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
	if inm != "" || ims != "" {
		h.conditional++
	}
	version := h.requests
	changing := strings.HasPrefix(r.URL.Path, "/changing/")
	etag := `"` + strings.ReplaceAll(r.URL.Path, "/", "_") + `"`
	if changing {
		etag = fmt.Sprintf(`"%s-v%d"`, strings.ReplaceAll(r.URL.Path, "/", "_"), version)
	} else if inm == etag || (inm == "" && ims == stableLastModified) {
		h.notModified++
		s.mu.Unlock()
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("ETag", etag)
	if !changing {
		w.Header().Set("Last-Modified", stableLastModified)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s</title></head><body><p>", r.URL.Path)
	if changing {
		fmt.Fprintf(&b, "version %d of a page that changes on every visit", version)
	} else {
		b.WriteString("a page that never changes")
	}
	b.WriteString("</p>")
	if r.URL.Path == "/" {
		for i := range s.n {
			fmt.Fprintf(&b, `<a href="%s/changing/%d">c%d</a> <a href="%s/stable/%d">s%d</a> `, s.base, i, i, s.base, i, i)
		}
	}
	b.WriteString("</body></html>")
	fmt.Fprint(w, b.String())
}

func (s *changingSite) snapshot() map[string]pageHits {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]pageHits, len(s.hits))
	for p, h := range s.hits {
		out[p] = *h
	}
	return out
}

// TestRecrawlAdaptsToChange crawls a site with a revisit policy (min 1s,
// max 8s, initial 2s) for a fixed time: pages whose content changes on
// every visit are re-fetched more often than pages that never change, the
// unchanged ones are asked for conditionally (If-None-Match /
// If-Modified-Since) and answered 304, and the schedule and change history
// are in ClickHouse.
func TestRecrawlAdaptsToChange(t *testing.T) {
	const (
		pages   = 3
		observe = 30 * time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 1, PagesPerHost: 1, FirstHostOctet: 245}, delay: e2eDelay})
	site := startChangingSite(t, "127.0.0.246", pages)

	w := kafkaio.NewWriter(e.p.Kafka, nil, nil)
	spec := &crawlv1.CrawlSpec{CrawlId: e.crawlID, Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		Revisit: &crawlv1.Revisit{Enabled: true, MinInterval: durationpb.New(time.Second),
			MaxInterval: durationpb.New(8 * time.Second), InitialInterval: durationpb.New(2 * time.Second)}}
	m, err := crawlcontrol.Message(e.p.Kafka.Topics().Control, spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, m); err != nil {
		t.Fatalf("publish crawl spec: %v", err)
	}
	_ = w.Close()
	// No wait: the scheduler reads the control topic to its end before it
	// admits the seeds of a crawl it has no spec of (GetSynced).
	e.seed(ctx, []string{site.base + "/"}, "")
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(observe):
	}
	hits := site.snapshot()
	e.stop()

	var changing, stable []int
	conditional, notModified := 0, 0
	for i := range pages {
		c, s := hits[fmt.Sprintf("/changing/%d", i)], hits[fmt.Sprintf("/stable/%d", i)]
		changing = append(changing, c.requests)
		stable = append(stable, s.requests)
		conditional += s.conditional
		notModified += s.notModified
		if s.conditional == 0 || s.notModified == 0 {
			t.Errorf("/stable/%d: %d requests, %d conditional, %d answered 304; want conditional revisits answered 304",
				i, s.requests, s.conditional, s.notModified)
		}
		if c.conditional == 0 {
			t.Errorf("/changing/%d: no conditional request among %d", i, c.requests)
		}
	}
	sort.Ints(changing)
	sort.Ints(stable)
	t.Logf("in %s: changing pages fetched %v times, stable pages %v times (%d conditional requests, %d answered 304), index %d",
		observe, changing, stable, conditional, notModified, hits["/"].requests)
	if changing[0] <= stable[len(stable)-1] {
		t.Errorf("changing pages fetched %v times, stable %v: want every changing page fetched more often than every stable one", changing, stable)
	}
	if stable[0] < 2 {
		t.Errorf("stable pages fetched %v times, want each revisited at least once", stable)
	}

	// The schedule and the history in ClickHouse.
	conn := e.p.Store.Conn()
	rows, err := conn.Query(ctx, `SELECT url, interval_s, visits, changes FROM revisits FINAL WHERE crawl_id = ? ORDER BY url`, e.crawlID)
	if err != nil {
		t.Fatalf("query revisits: %v", err)
	}
	defer rows.Close()
	maxChanging, minStable := uint32(0), uint32(1<<31)
	n := 0
	for rows.Next() {
		var (
			url                      string
			interval, visits, change uint32
		)
		if err := rows.Scan(&url, &interval, &visits, &change); err != nil {
			t.Fatalf("scan revisits: %v", err)
		}
		n++
		switch {
		case strings.Contains(url, "/changing/"):
			maxChanging = max(maxChanging, interval)
			if change == 0 {
				t.Errorf("%s: %d visits, no change recorded", url, visits)
			}
		case strings.Contains(url, "/stable/"):
			minStable = min(minStable, interval)
			if change != 0 {
				t.Errorf("%s: %d changes recorded for a page that never changes", url, change)
			}
		}
	}
	if n != 2*pages+1 {
		t.Errorf("revisits holds %d URLs, want %d", n, 2*pages+1)
	}
	if maxChanging >= minStable {
		t.Errorf("revisit intervals: changing pages up to %ds, stable pages from %ds; want changing shorter", maxChanging, minStable)
	}
	var visits, changed, notMod uint64
	if err := conn.QueryRow(ctx, `SELECT count(), sum(changed), sum(not_modified) FROM change_history FINAL WHERE crawl_id = ?`, e.crawlID).
		Scan(&visits, &changed, &notMod); err != nil {
		t.Fatalf("query change_history: %v", err)
	}
	t.Logf("change_history: %d visits, %d changed, %d not modified; intervals: changing ≤ %ds, stable ≥ %ds", visits, changed, notMod, maxChanging, minStable)
	if changed == 0 || notMod == 0 {
		t.Errorf("change_history: %d changed and %d not-modified visits, want both", changed, notMod)
	}
}
