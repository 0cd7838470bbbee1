package websim

import (
	"net/http"
	"testing"
)

// TestResources checks the per-resource history behind Stats: every
// spelling of one article is one resource, and a 500 answered three times
// has three hits with their statuses.
func TestResources(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 1, Articles: 3, FirstAddr: mustAddr(t, "127.1.5.1"), TrapEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := &http.Client{}
	base := w.Seeds()[0]
	for _, p := range []string{"news/2021/story-1.html", "news/2021/story%2D1.html?", "news/2021/%73tory-1.html;jsessionid=A",
		"error", "error", "error", "robots.txt"} {
		get(t, c, base+p)
	}
	got := map[string]Resource{}
	for _, r := range w.Resources() {
		got[r.ID] = r
	}
	if len(got) != 2 {
		t.Fatalf("resources %v, want the article and /error", got)
	}
	story, errPage := got["0 /news/2021/story-1.html"], got["0 /error"]
	if story.Kind != KindArticle || len(story.Hits) != 3 || story.Hits[0].Status != 200 {
		t.Errorf("article: %+v, want kind article, three hits of 200", story)
	}
	if errPage.Kind != KindError || len(errPage.Hits) != 3 || errPage.Hits[2].Status != 500 {
		t.Errorf("/error: %+v, want kind error, three hits of 500", errPage)
	}
	if s := settledStats(t, w); s.Duplicates != 2 || s.Retries != 2 {
		t.Errorf("stats: %d duplicates, %d retries; want 2 and 2", s.Duplicates, s.Retries)
	}
}

// TestContentIDs: the content pages a careful crawl fetches are the
// resources ContentIDs names, Pages() of them.
func TestContentIDs(t *testing.T) {
	w, err := Start(t.Context(), Config{Hosts: 2, Articles: 12, PerList: 5, FirstAddr: mustAddr(t, "127.1.5.20"), TrapEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ids := w.ContentIDs()
	if len(ids) != w.Pages() {
		t.Fatalf("%d content ids, want Pages() = %d", len(ids), w.Pages())
	}
	c := &http.Client{}
	for _, u := range []string{w.Seeds()[1], w.Seeds()[1] + "list?page=3", w.Seeds()[1] + "news/2021/story-7.html"} {
		get(t, c, u)
	}
	// a page fetched again and a resource that is no content page end
	// the crawl, not its content window
	get(t, c, w.Seeds()[1])
	get(t, c, w.Seeds()[1]+"robots.txt")
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for _, r := range w.Resources() {
		if !want[r.ID] {
			t.Errorf("requested content page %s is not among ContentIDs", r.ID)
		}
	}
	s := settledStats(t, w)
	if s.Pages != 3 {
		t.Errorf("stats: %d pages, want 3", s.Pages)
	}
	if s.Requests != 5 || s.PageRequests != 3 || !s.LastPage.After(s.First) || !s.Last.After(s.LastPage) {
		t.Errorf("stats: %d requests, %d up to the last content page, first %v, last page %v, last %v; want 5, 3 and first < last page < last",
			s.Requests, s.PageRequests, s.First, s.LastPage, s.Last)
	}
}
