package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
)

// crawlRows writes rows of crawl id to the tables the pipeline writes
// most (the fetch log's rollups fill themselves).
func crawlRows(t *testing.T, s *chstore.Store, id string, now time.Time) {
	t.Helper()
	ctx := t.Context()
	insert(t, ctx, s, chstore.URLSeen, []chstore.SeenRow{
		{CrawlID: id, FP: 1, URL: "http://127.0.0.2/a", FirstSeen: now},
		{CrawlID: id, FP: 2, URL: "http://127.0.0.2/b", FirstSeen: now},
	})
	insert(t, ctx, s, chstore.FetchLog, []chstore.FetchLogRow{
		{CrawlID: id, URLFP: 1, URL: "http://127.0.0.2/a", Host: "127.0.0.2", Status: 200, FetchedAt: now, Final: true},
		{CrawlID: id, URLFP: 2, URL: "http://127.0.0.2/b", Host: "127.0.0.2", Status: 404, FetchedAt: now, Final: true},
	})
	insert(t, ctx, s, chstore.Documents, []chstore.DocumentRow{
		{CrawlID: id, URLFP: 1, URL: "http://127.0.0.2/a", Host: "127.0.0.2", Status: 200, Title: "A", FetchedAt: now},
	})
	insert(t, ctx, s, chstore.URLEvents, []chstore.URLEventRow{
		{CrawlID: id, URLFP: 1, URL: "http://127.0.0.2/a", Host: "127.0.0.2", State: "duplicate", Reason: "duplicate", EventTime: now},
	})
	insert(t, ctx, s, chstore.LinksDropped, []chstore.LinksDroppedRow{{CrawlID: id, Host: "127.0.0.2", Reason: "out_of_scope", Hour: now, N: 3}})
}

// deletedView is the answer about a deleted crawl (410): the error and the
// crawl.
type deletedView struct {
	Error string `json:"error"`
	crawljobs.CrawlView
}

// TestDelete: DELETE /v1/crawls/{id} publishes the crawl's next revision,
// cancelled and marked deleted, and answers 202 while ClickHouse removes
// its rows (rows left per table), 200 once none is left; a second DELETE
// changes nothing; the crawl is listed no more, and every route of it
// answers 410 (GET with its deletion's progress), its id stays taken;
// another crawl's rows and answers are untouched; an unknown crawl is a
// 404, an impossible id a 400. Rows landing after the deletion (the
// pipeline's in-flight records) are removed by the sweep.
func TestDelete(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for _, id := range []string{"del", "keep"} {
		if code, raw := e.do(t, http.MethodPost, "/v1/crawls", `{"crawl_id":"`+id+`","seeds":["http://127.0.0.2/"]}`, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d %s", id, code, raw)
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	crawlRows(t, e.store, "del", now)
	crawlRows(t, e.store, "keep", now)
	var before crawljobs.CrawlView
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls/keep", "", &before); code != http.StatusOK || before.Counts == nil {
		t.Fatalf("get keep: %d %s", code, raw)
	}

	for _, tt := range []struct {
		path      string
		wantCode  int
		wantField string
	}{
		{"/v1/crawls/nope", http.StatusNotFound, ""},
		{"/v1/crawls/a%20b", http.StatusBadRequest, "id"},
		{"/v1/crawls/" + strings.Repeat("x", 65), http.StatusBadRequest, "id"},
	} {
		var body errorBody
		code, raw := e.do(t, http.MethodDelete, tt.path, "", &body)
		if code != tt.wantCode || body.Error == "" || (tt.wantField != "" && (len(body.Fields) != 1 || body.Fields[0].Field != tt.wantField)) {
			t.Errorf("DELETE %s: %d %s, want %d naming field %q", tt.path, code, raw, tt.wantCode, tt.wantField)
		}
	}

	var v crawljobs.CrawlView
	code, raw := e.do(t, http.MethodDelete, "/v1/crawls/del", "", &v)
	if code != http.StatusAccepted || v.Status != jobs.StatusDeleted || v.State != "cancelled" || v.Revision != 2 || v.DeletedAt == nil || v.Deletion == nil {
		t.Fatalf("DELETE del: %d %s, want 202, deleted, cancelled, revision 2", code, raw)
	}
	for _, table := range []string{"url_seen", "fetch_log", "fetch_per_host_minute", "fetch_status_minute", "documents", "url_events", "links_dropped_v2"} {
		if v.Deletion.RowsLeft[table] == 0 {
			t.Errorf("DELETE del: rows_left %v, want rows in %s", v.Deletion.RowsLeft, table)
		}
	}
	if v.Deletion.Done {
		t.Errorf("DELETE del: done with rows left")
	}
	// The control topic holds the deleting revision: every service sees
	// the crawl cancelled.
	specs := crawlcontrol.NewSpecs()
	for _, m := range readTopic(t, e.kafka, e.kafka.Topics().Control, 5) {
		if crawlcontrol.IsClaim(m) {
			continue
		}
		var s crawlv1.CrawlSpec
		if err := kafkaio.Decode(m, &s); err != nil {
			t.Fatal(err)
		}
		specs.Apply(&s)
	}
	if s := specs.Get("del"); !crawlcontrol.Deleted(s) || s.GetRevision() != 2 || specs.State("del") != crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		t.Errorf("control topic spec of del = %v", s)
	}

	gone := waitDeletion(t, e, "del")
	if !gone.DeletedAt.Equal(*v.DeletedAt) || gone.Status != jobs.StatusDeleted || !strings.Contains(gone.Error, "deleted") {
		t.Errorf("GET del after its deletion: %+v", gone)
	}
	// Idempotent: the same revision, nothing left (200).
	var again crawljobs.CrawlView
	if code, raw := e.do(t, http.MethodDelete, "/v1/crawls/del", "", &again); code != http.StatusOK || again.Revision != 2 || !again.DeletedAt.Equal(*v.DeletedAt) || !again.Deletion.Done {
		t.Errorf("second DELETE: %d %s, want 200, revision 2, done", code, raw)
	}

	var list api.ListResponse
	e.do(t, http.MethodGet, "/v1/crawls", "", &list)
	if len(list.Crawls) != 1 || list.Crawls[0].CrawlID != "keep" {
		t.Errorf("list after the deletion = %+v, want keep alone", list.Crawls)
	}
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/v1/crawls/del/pause"}, {http.MethodPost, "/v1/crawls/del/resume"}, {http.MethodPost, "/v1/crawls/del/cancel"},
		{http.MethodGet, "/v1/crawls/del/documents"}, {http.MethodGet, "/v1/crawls/del/export?table=fetch_log"},
	} {
		if code, raw := e.do(t, r.method, r.path, "", nil); code != http.StatusGone || !strings.Contains(string(raw), "deleted") {
			t.Errorf("%s %s: %d %s, want 410", r.method, r.path, code, raw)
		}
	}
	var refused errorBody
	if code, _ := e.do(t, http.MethodPost, "/v1/crawls", `{"crawl_id":"del","seeds":["http://127.0.0.2/"]}`, &refused); code != http.StatusConflict ||
		!strings.Contains(refused.Error, "deleted") || len(refused.Fields) != 1 || refused.Fields[0].Field != "crawl_id" {
		t.Errorf("create with a deleted crawl's id: %d %+v, want 409 naming crawl_id", code, refused)
	}

	// The other crawl's rows are there, its answers unchanged.
	var after crawljobs.CrawlView
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls/keep", "", &after); code != http.StatusOK || after.Counts == nil ||
		after.Counts.Admitted != before.Counts.Admitted || after.Counts.Fetched != before.Counts.Fetched || after.Counts.Documents != before.Counts.Documents {
		t.Errorf("get keep after del was deleted: %d %s, want the counts of before (%+v)", code, raw, before.Counts)
	}
	left, err := stats.New(e.store).CrawlRows(ctx, "keep")
	if err != nil || len(left) != 7 {
		t.Errorf("rows of keep: %v, %v; want rows in 7 tables", left, err)
	}

	// The pipeline's in-flight records land after the deletion: a fetcher
	// records a queued request as cancelled. The sweep removes them.
	insert(t, ctx, e.store, chstore.FetchLog, []chstore.FetchLogRow{
		{CrawlID: "del", URLFP: 3, URL: "http://127.0.0.2/c", Host: "127.0.0.2", ErrorKind: "cancelled", FetchedAt: now, Final: true},
	})
	var late deletedView
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls/del", "", &late); code != http.StatusGone || late.Deletion == nil || late.Deletion.Done || late.Deletion.RowsLeft["fetch_log"] != 1 {
		t.Fatalf("GET del after a late row: %d %s, want 410, not done, 1 row in fetch_log", code, raw)
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := e.jobs.SweepDeleted(sweepCtx, 50*time.Millisecond, time.Hour); err != nil {
			t.Errorf("sweep: %v", err)
		}
	}()
	waitDeletion(t, e, "del")
	stopSweep()
	wg.Wait()
}

// waitDeletion polls GET /v1/crawls/{id} of a deleted crawl (410) until
// its deletion is done, and returns the last answer.
func waitDeletion(t *testing.T, e env, id string) deletedView {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var v deletedView
		code, raw := e.do(t, http.MethodGet, "/v1/crawls/"+id, "", &v)
		if code != http.StatusGone || v.Deletion == nil || v.Deletion.Error != "" {
			t.Fatalf("GET %s: %d %s, want 410 with the deletion's progress", id, code, raw)
		}
		if v.Deletion.Done {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rows of %s still left after 60s: %v", id, v.Deletion.RowsLeft)
		case <-tick.C:
		}
	}
}
