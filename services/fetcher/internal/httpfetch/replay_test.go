package httpfetch

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/testkit/hanguptest"
)

// TestReplayRefused: a site that closes a reused connection after it
// received the request must see that request once. net/http would send it
// again at once on a new connection (a GET is replayable), a request the
// fetcher's politeness never saw; the fetch must instead fail with a
// Connect failure (ErrReplayRefused, ReplayRefused set), to be retried on
// the host's next turn. A request on a fresh connection is not affected.
func TestReplayRefused(t *testing.T) {
	srv := hanguptest.Start(t, "127.0.0.77")
	base := srv.URL
	f := New(Options{AllowPrivate: true})
	defer f.Close()

	first := f.Fetch(t.Context(), Request{URL: base + "/a"})
	if first.Err != nil || first.Status != 200 || first.ReplayRefused {
		t.Fatalf("first fetch: status %d err %v refused %v", first.Status, first.Err, first.ReplayRefused)
	}
	second := f.Fetch(t.Context(), Request{URL: base + "/b"}) // on the kept connection, which the site closes
	if !second.ReplayRefused || !errors.Is(second.Err, ErrReplayRefused) || second.Kind != failure.Connect {
		t.Fatalf("second fetch: status %d kind %q err %v refused %v; want a refused replay (connect)",
			second.Status, second.Kind, second.Err, second.ReplayRefused)
	}
	if got := srv.Paths(); len(got) != 2 || got[1] != "/b" {
		t.Fatalf("the site received %q; want /a and /b once each", got)
	}
	// the fetcher's own retry, on the host's next turn: a new connection,
	// answered
	third := f.Fetch(t.Context(), Request{URL: base + "/b"})
	if third.Err != nil || third.Status != 200 || third.ReplayRefused {
		t.Fatalf("retry: status %d err %v refused %v", third.Status, third.Err, third.ReplayRefused)
	}
	if got := srv.Paths(); len(got) != 3 {
		t.Fatalf("the site received %q; want 3 requests", got)
	}
}

// TestRetryOfUnsentRequest: a host's idle connection closed by the
// fetcher itself (Release, when the host's queue empties) right before
// the next request of the host: the transport may pick the closed
// connection, fail to send the request and send it on a new one. Nothing
// reached the site, so that retry is let through: every fetch is answered
// and the site receives each request once.
func TestRetryOfUnsentRequest(t *testing.T) {
	const fetches = 200
	var mu sync.Mutex
	hits := map[string]int{}
	srv := unstartedOn(t, "127.0.0.78", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>hello</p>")
	}))
	srv.Start()
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	f := New(Options{AllowPrivate: true})
	defer f.Close()
	for i := range fetches {
		res := f.Fetch(t.Context(), Request{URL: fmt.Sprintf("%s/p%d", srv.URL, i), Host: host})
		if res.Err != nil || res.Status != 200 || res.ReplayRefused {
			t.Fatalf("fetch %d after its host's connection was released: status %d err %v refused %v", i, res.Status, res.Err, res.ReplayRefused)
		}
		f.Release(host)
	}
	mu.Lock()
	defer mu.Unlock()
	for p, n := range hits {
		if n != 1 {
			t.Errorf("%s received %d times, want once", p, n)
		}
	}
	if len(hits) != fetches {
		t.Errorf("the site received %d distinct requests, want %d", len(hits), fetches)
	}
}
