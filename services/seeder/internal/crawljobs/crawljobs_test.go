package crawljobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control/controltest"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// env is the crawl-job operations as seeder serve runs them: over the
// control topic of a real broker (internal/control, followed until the
// test ends) and a real ClickHouse (internal/stats).
type env struct {
	jobs  *crawljobs.Service
	ctl   *control.Control
	kafka kafkaio.Config
	clock *controltest.Clock // the control table's
}

// newEnv is an env over a broker of its own and store.
func newEnv(t *testing.T, store *chstore.Store) env {
	t.Helper()
	kc := kafkatest.Config(t, 2)
	ctl, clock := controltest.Start(t, kc, prometheus.NewRegistry())
	return env{jobs: crawljobs.New(ctl, stats.New(store), nil, zap.NewNop()), ctl: ctl, kafka: kc, clock: clock}
}

// create creates crawl id with one seed.
func (e env) create(t *testing.T, id string) crawljobs.CreateResponse {
	t.Helper()
	r, err := e.jobs.Create(t.Context(), jobs.Request{CrawlID: id, Seeds: []string{"http://127.0.0.2/" + id}})
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return r
}

// seeds returns how many seeds of crawl id the discovered topic holds.
func (e env) seeds(t *testing.T, id string) int {
	t.Helper()
	n := 0
	err := kafkaio.ReadToEnd(t.Context(), e.kafka, e.kafka.Topics().Discovered, kafkaio.ReadOptions{}, func(m kafka.Message) {
		var d crawlv1.DiscoveredURL
		if err := kafkaio.Decode(m, &d); err == nil && d.GetCrawlId() == id {
			n++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// published returns the revisions of crawl id the control topic holds, in
// topic order: what every other service reads.
func (e env) published(t *testing.T, id string) []*crawlv1.CrawlSpec {
	t.Helper()
	var out []*crawlv1.CrawlSpec
	err := kafkaio.ReadToEnd(t.Context(), e.kafka, e.kafka.Topics().Control, kafkaio.ReadOptions{}, func(m kafka.Message) {
		if crawlcontrol.IsClaim(m) || string(m.Key) != id {
			return
		}
		var s crawlv1.CrawlSpec
		if err := kafkaio.Decode(m, &s); err != nil {
			t.Errorf("control record of %s: %v", id, err)
			return
		}
		out = append(out, &s)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// last is the latest of revisions (nil: none).
func last(revisions []*crawlv1.CrawlSpec) *crawlv1.CrawlSpec {
	if len(revisions) == 0 {
		return nil
	}
	return revisions[len(revisions)-1]
}

// operation is an operation of the service on crawl id, as the faces call it.
type operation func(ctx context.Context, s *crawljobs.Service, id string) error

func creating(req jobs.Request) operation {
	return func(ctx context.Context, s *crawljobs.Service, id string) error {
		req.CrawlID = id
		_, err := s.Create(ctx, req)
		return err
	}
}

func setting(state crawlv1.CrawlState) operation {
	return func(ctx context.Context, s *crawljobs.Service, id string) error {
		_, err := s.SetState(ctx, id, state)
		return err
	}
}

func deleting(ctx context.Context, s *crawljobs.Service, id string) error {
	_, err := s.Delete(ctx, id)
	return err
}

// TestRefusals: every refusal of an operation is an *Error of the kind the
// faces turn into their answer, with a message and naming each field at
// fault in order; the refused operation publishes nothing: the crawl's
// specification (here and on the control topic) and its seeds stay as
// they were.
func TestRefusals(t *testing.T) {
	e := newEnv(t, chtest.NewStore(t))
	seed := []string{"http://127.0.0.2/"}
	var (
		paused    = crawlv1.CrawlState_CRAWL_STATE_PAUSED
		running   = crawlv1.CrawlState_CRAWL_STATE_RUNNING
		cancelled = crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	)
	// Set-ups: the crawl id's history before the refused operation.
	created := func(t *testing.T, id string) { e.create(t, id) }
	cancel := func(t *testing.T, id string) {
		e.create(t, id)
		if _, err := e.jobs.SetState(t.Context(), id, cancelled); err != nil {
			t.Fatal(err)
		}
	}
	deleted := func(t *testing.T, id string) {
		e.create(t, id)
		if _, err := e.jobs.Delete(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	// Another submission (on this server or another) claimed the id and
	// has not published its specification yet.
	claimed := func(t *testing.T, id string) {
		if owned, err := e.ctl.Claim(t.Context(), id); err != nil || !owned {
			t.Fatalf("claim %s: %v, %v", id, owned, err)
		}
	}
	// The crawl's time limit passed: it is cancelled without an operator.
	timedOut := func(t *testing.T, id string) {
		req := jobs.Request{CrawlID: id, Seeds: seed, Limits: &jobs.Limits{MaxDuration: "1h"}}
		if _, err := e.jobs.Create(t.Context(), req); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(2 * time.Hour)
		if got := e.jobs.Crawl(id).GetState(); got != cancelled {
			t.Fatalf("state %v past the time limit, want cancelled", got)
		}
	}

	tests := []struct {
		name       string
		id         string
		setup      func(t *testing.T, id string) // nil: a new id
		op         operation
		wantKind   crawljobs.Kind
		wantFields []string
		wantMsg    string // in the message
	}{
		{name: "create with an impossible id", id: "bad id!", op: creating(jobs.Request{Seeds: seed}),
			wantKind: crawljobs.Invalid, wantFields: []string{"crawl_id"}},
		{name: "create with invalid seeds", id: "bad-seeds", op: creating(jobs.Request{Seeds: []string{seed[0], "not a url", "javascript:void(0)"}}),
			wantKind: crawljobs.Invalid, wantFields: []string{"seeds[1]", "seeds[2]"}},
		{name: "create without seeds", id: "no-seeds", op: creating(jobs.Request{}),
			wantKind: crawljobs.Invalid, wantFields: []string{"seeds"}},
		{name: "create as its own previous crawl", id: "own-previous", op: creating(jobs.Request{Seeds: seed, PreviousCrawlID: "own-previous"}),
			wantKind: crawljobs.Invalid, wantFields: []string{"previous_crawl_id"}},
		{name: "create from sitemaps without a sitemap source", id: "sitemaps", op: creating(jobs.Request{Seeds: seed, Sitemaps: true}),
			wantKind: crawljobs.Invalid, wantFields: []string{"sitemaps"}},
		{name: "create a taken id", id: "taken", setup: created, op: creating(jobs.Request{Seeds: seed}),
			wantKind: crawljobs.Conflict, wantFields: []string{"crawl_id"}, wantMsg: "exists"},
		{name: "create a deleted crawl's id", id: "was-deleted", setup: deleted, op: creating(jobs.Request{Seeds: seed}),
			wantKind: crawljobs.Conflict, wantFields: []string{"crawl_id"}, wantMsg: "deleted"},
		{name: "create an id another submission claimed", id: "claimed", setup: claimed, op: creating(jobs.Request{Seeds: seed}),
			wantKind: crawljobs.Conflict, wantFields: []string{"crawl_id"}, wantMsg: "exists"},
		{name: "pause an unknown crawl", id: "unknown", op: setting(paused), wantKind: crawljobs.NotFound, wantMsg: "unknown"},
		{name: "cancel an unknown crawl", id: "unknown", op: setting(cancelled), wantKind: crawljobs.NotFound, wantMsg: "unknown"},
		{name: "pause a deleted crawl", id: "deleted-pause", setup: deleted, op: setting(paused), wantKind: crawljobs.Gone, wantMsg: "deleted"},
		{name: "resume a deleted crawl", id: "deleted-resume", setup: deleted, op: setting(running), wantKind: crawljobs.Gone, wantMsg: "deleted"},
		{name: "cancel a deleted crawl", id: "deleted-cancel", setup: deleted, op: setting(cancelled), wantKind: crawljobs.Gone, wantMsg: "deleted"},
		{name: "resume a cancelled crawl", id: "cancelled-resume", setup: cancel, op: setting(running), wantKind: crawljobs.Conflict, wantMsg: "cancelled"},
		{name: "pause a cancelled crawl", id: "cancelled-pause", setup: cancel, op: setting(paused), wantKind: crawljobs.Conflict, wantMsg: "cancelled"},
		{name: "resume a crawl past its time limit", id: "timed-out", setup: timedOut, op: setting(running), wantKind: crawljobs.Conflict, wantMsg: "time limit"},
		{name: "delete an impossible id", id: "a b", op: deleting, wantKind: crawljobs.Invalid, wantFields: []string{"id"}},
		{name: "delete a too long id", id: strings.Repeat("x", jobs.MaxCrawlID+1), op: deleting, wantKind: crawljobs.Invalid, wantFields: []string{"id"}},
		{name: "delete an unknown crawl", id: "unknown", op: deleting, wantKind: crawljobs.NotFound, wantMsg: "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup(t, tt.id)
			}
			before, revisions, seeds := e.jobs.Crawl(tt.id), len(e.published(t, tt.id)), e.seeds(t, tt.id)

			err := tt.op(t.Context(), e.jobs, tt.id)
			var refused *crawljobs.Error
			if !errors.As(err, &refused) {
				t.Fatalf("err = %v, want a *crawljobs.Error", err)
			}
			if refused.Kind != tt.wantKind || refused.Msg == "" || !strings.Contains(refused.Msg, tt.wantMsg) {
				t.Errorf("err = %+v, want kind %d with a message saying %q", refused, tt.wantKind, tt.wantMsg)
			}
			var fields []string
			for _, f := range refused.Fields {
				fields = append(fields, f.Field)
				if f.Message == "" {
					t.Errorf("field %s without a message", f.Field)
				}
			}
			if strings.Join(fields, ",") != strings.Join(tt.wantFields, ",") {
				t.Errorf("fields %v, want %v", fields, tt.wantFields)
			}

			if after := e.jobs.Crawl(tt.id); !proto.Equal(after, before) {
				t.Errorf("spec changed by a refused operation: %v, was %v", after, before)
			}
			if n := len(e.published(t, tt.id)); n != revisions {
				t.Errorf("%d revisions on the control topic, was %d", n, revisions)
			}
			if n := e.seeds(t, tt.id); n != seeds {
				t.Errorf("%d seeds on the discovered topic, was %d", n, seeds)
			}
		})
	}
}

// crawlRows is what a crawl left in ClickHouse: its rows of the tables the
// pipeline writes most, inserted as the services insert them.
type crawlRows struct {
	seen    []chstore.SeenRow
	fetches []chstore.FetchLogRow
	docs    []chstore.DocumentRow
}

// insert writes the rows (each table in one insert, one block).
func (r crawlRows) insert(t *testing.T, store *chstore.Store) {
	t.Helper()
	insertRows(t, store, chstore.URLSeen, r.seen)
	insertRows(t, store, chstore.FetchLog, r.fetches)
	insertRows(t, store, chstore.Documents, r.docs)
}

// tables is how many rows of the crawl each table holds once r is
// inserted: r's own, and those the materialized views of fetch_log add to
// its per-minute rollups, one row per group of an inserted block
// (fetch_per_host_minute: host and minute; fetch_status_minute: status,
// error kind and minute). Every key is distinct, so no merge collapses
// them.
func (r crawlRows) tables() map[string]uint64 {
	out := make(map[string]uint64)
	add := func(table string, n int) {
		if n > 0 {
			out[table] = uint64(n)
		}
	}
	add("url_seen", len(r.seen))
	add("fetch_log", len(r.fetches))
	add("documents", len(r.docs))
	perHost, perStatus := make(map[string]bool), make(map[string]bool)
	for _, f := range r.fetches {
		minute := f.FetchedAt.Truncate(time.Minute).String()
		perHost[f.Host+" "+minute] = true
		perStatus[fmt.Sprint(f.Status)+" "+f.ErrorKind+" "+minute] = true
	}
	add("fetch_per_host_minute", len(perHost))
	add("fetch_status_minute", len(perStatus))
	return out
}

func insertRows[T any](t *testing.T, store *chstore.Store, table chstore.Table[T], rows []T) {
	t.Helper()
	if len(rows) == 0 {
		return
	}
	b, err := store.Conn().PrepareBatch(t.Context(), "INSERT INTO "+table.Name+" ("+strings.Join(table.Columns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(table.Values(r)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatalf("insert into %s: %v", table.Name, err)
	}
}

// TestLifecycle: a crawl is created (its specification and seeds
// published), viewed with the counts of its rows in ClickHouse, paused,
// resumed and cancelled (each a new revision on the control topic, a
// repeated state none), then deleted: the deletion reports the rows each
// table held, the view reports them until ClickHouse has removed them and
// then done; deleting again publishes nothing; rows that land after the
// deletion are reported and the sweep removes them. Another crawl's rows
// and counts are untouched throughout.
func TestLifecycle(t *testing.T) {
	store := chtest.NewStore(t)
	e := newEnv(t, store)
	ctx := t.Context()

	req := jobs.Request{CrawlID: "life", Name: "life test", Seeds: []string{"http://127.0.0.2/a", "http://127.0.0.2/d", "HTTP://127.0.0.2/a"}}
	created, err := e.jobs.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if created.CrawlID != "life" || created.Name != req.Name || created.State != "running" || created.Revision != 1 || created.SeedsPublished != 2 {
		t.Errorf("created = %+v, want life, running, revision 1, 2 seeds (a duplicate dropped)", created)
	}
	if n := e.seeds(t, "life"); n != created.SeedsPublished {
		t.Errorf("%d seeds on the discovered topic, %d reported published", n, created.SeedsPublished)
	}
	keep := e.create(t, "keep")

	now := time.Now().UTC().Truncate(time.Second)
	life := crawlRows{
		seen: []chstore.SeenRow{
			{CrawlID: "life", FP: 1, URL: "http://127.0.0.2/a", FirstSeen: now},
			{CrawlID: "life", FP: 2, URL: "http://127.0.0.2/b", FirstSeen: now},
			{CrawlID: "life", FP: 3, URL: "http://127.0.0.2/c", FirstSeen: now},
			{CrawlID: "life", FP: 4, URL: "http://127.0.0.2/d", FirstSeen: now},
		},
		fetches: []chstore.FetchLogRow{
			// 1 fetched; 2 failed twice, the second time for good; 3
			// failed once, a retry scheduled; 4 not attempted yet.
			{CrawlID: "life", URLFP: 1, URL: "http://127.0.0.2/a", Host: "127.0.0.2", Status: 200, FetchedAt: now, Final: true},
			{CrawlID: "life", URLFP: 2, URL: "http://127.0.0.2/b", Host: "127.0.0.2", ErrorKind: "timeout", FetchedAt: now},
			{CrawlID: "life", URLFP: 2, URL: "http://127.0.0.2/b", Host: "127.0.0.2", ErrorKind: "timeout", Attempt: 1, FetchedAt: now, Final: true},
			{CrawlID: "life", URLFP: 3, URL: "http://127.0.0.2/c", Host: "127.0.0.2", ErrorKind: "timeout", FetchedAt: now},
		},
		docs: []chstore.DocumentRow{{CrawlID: "life", URLFP: 1, URL: "http://127.0.0.2/a", Host: "127.0.0.2", Status: 200, Title: "A", FetchedAt: now}},
	}
	life.insert(t, store)
	other := crawlRows{
		seen:    []chstore.SeenRow{{CrawlID: "keep", FP: 1, URL: "http://127.0.0.3/", FirstSeen: now}},
		fetches: []chstore.FetchLogRow{{CrawlID: "keep", URLFP: 1, URL: "http://127.0.0.3/", Host: "127.0.0.3", Status: 200, FetchedAt: now, Final: true}},
	}
	other.insert(t, store)

	v := e.jobs.View(ctx, e.jobs.Crawl("life"))
	// The seeds of both crawls are unconsumed on the discovered topic,
	// which every crawl shares: in flight.
	want := jobs.Counts{Admitted: 4, Terminal: 2, Pending: 2, Retrying: 1, Queued: 1, Fetched: 1, Errors: 3, Documents: 1,
		InFlight: int64(created.SeedsPublished + keep.SeedsPublished)}
	if v.Counts == nil || *v.Counts != want || v.CountsError != "" || v.Status != "running" || len(v.Spec) == 0 || v.Deletion != nil {
		t.Errorf("view: counts %+v (%q), status %q, want %+v, running, with its spec", v.Counts, v.CountsError, v.Status, want)
	}
	keepBefore := e.jobs.View(ctx, e.jobs.Crawl("keep")).Counts
	if keepBefore == nil || keepBefore.Admitted != 1 || keepBefore.Fetched != 1 {
		t.Fatalf("keep's counts = %+v, want its own row", keepBefore)
	}

	steps := []struct {
		state     crawlv1.CrawlState
		wantState string
		wantRev   uint64
	}{
		{crawlv1.CrawlState_CRAWL_STATE_PAUSED, "paused", 2},
		{crawlv1.CrawlState_CRAWL_STATE_PAUSED, "paused", 2}, // no change, no revision
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, "running", 3},
		{crawlv1.CrawlState_CRAWL_STATE_CANCELLED, "cancelled", 4},
		{crawlv1.CrawlState_CRAWL_STATE_CANCELLED, "cancelled", 4},
	}
	for _, s := range steps {
		v, err := e.jobs.SetState(ctx, "life", s.state)
		if err != nil {
			t.Fatalf("set %s: %v", s.wantState, err)
		}
		if v.State != s.wantState || v.Status != s.wantState || v.Revision != s.wantRev {
			t.Errorf("set %s: state %s (%s) revision %d, want revision %d", s.wantState, v.State, v.Status, v.Revision, s.wantRev)
		}
		if got := e.published(t, "life"); uint64(len(got)) != s.wantRev || last(got).GetState() != s.state {
			t.Errorf("set %s: %d revisions on the control topic, the last %v; want %d", s.wantState, len(got), last(got), s.wantRev)
		}
		if got := e.jobs.View(ctx, e.jobs.Crawl("life")); got.Status != s.wantState || got.Counts == nil || *got.Counts != want {
			t.Errorf("view after set %s: status %q counts %+v", s.wantState, got.Status, got.Counts)
		}
	}
	if got := ids(e.jobs.Crawls()); got != "keep,life" {
		t.Errorf("crawls listed: %s, want keep,life (newest first)", got)
	}

	deleted, err := e.jobs.Delete(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	if deleted.Status != jobs.StatusDeleted || deleted.State != "cancelled" || deleted.Revision != 5 || deleted.DeletedAt == nil || deleted.Counts != nil {
		t.Fatalf("deleted = %+v, want deleted, cancelled, revision 5", deleted)
	}
	if d := deleted.Deletion; d == nil || d.Done || d.Error != "" || !maps.Equal(d.RowsLeft, life.tables()) {
		t.Errorf("deletion = %+v, want the rows inserted: %v", d, life.tables())
	}
	if got := e.published(t, "life"); len(got) != 5 || !crawlcontrol.Deleted(last(got)) || last(got).GetState() != crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		t.Errorf("control topic: %d revisions, the last %v; want 5, deleted", len(got), last(got))
	}
	done := waitDeletion(t, e, "life")
	if done.DeletedAt == nil || !done.DeletedAt.Equal(*deleted.DeletedAt) || done.Revision != 5 || done.Status != jobs.StatusDeleted {
		t.Errorf("view once removed = %+v", done)
	}

	again, err := e.jobs.Delete(ctx, "life")
	if err != nil {
		t.Fatal(err)
	}
	if again.Revision != 5 || again.DeletedAt == nil || !again.DeletedAt.Equal(*deleted.DeletedAt) || again.Deletion == nil || !again.Deletion.Done || again.Deletion.RowsLeft != nil {
		t.Errorf("second delete = %+v (%+v), want revision 5, done", again, again.Deletion)
	}
	if n := len(e.published(t, "life")); n != 5 {
		t.Errorf("second delete: %d revisions on the control topic, want 5", n)
	}
	if got := ids(e.jobs.Crawls()); got != "keep" {
		t.Errorf("crawls listed after the deletion: %s, want keep", got)
	}
	if got := e.jobs.View(ctx, e.jobs.Crawl("keep")).Counts; got == nil || *got != *keepBefore {
		t.Errorf("keep's counts after life's deletion = %+v, want %+v", got, keepBefore)
	}

	// A record the pipeline had in flight lands after the deletion (a
	// fetcher records a queued request as cancelled): reported, then
	// removed by the sweep.
	late := crawlRows{fetches: []chstore.FetchLogRow{
		{CrawlID: "life", URLFP: 4, URL: "http://127.0.0.2/d", Host: "127.0.0.2", ErrorKind: "cancelled", FetchedAt: now, Final: true},
	}}
	late.insert(t, store)
	if d := e.jobs.View(ctx, e.jobs.Crawl("life")).Deletion; d == nil || d.Done || !maps.Equal(d.RowsLeft, late.tables()) {
		t.Errorf("deletion after a late row = %+v, want %v left", d, late.tables())
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := e.jobs.SweepDeleted(sweepCtx, 50*time.Millisecond, time.Hour); err != nil {
			t.Errorf("sweep: %v", err)
		}
	})
	waitDeletion(t, e, "life")
	stopSweep()
	wg.Wait()
	if left, err := stats.New(store).CrawlRows(ctx, "keep"); err != nil || !maps.Equal(left, other.tables()) {
		t.Errorf("rows of keep = %v, %v; want %v", left, err, other.tables())
	}
}

// ids is the crawl ids of specs, in order.
func ids(specs []*crawlv1.CrawlSpec) string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.GetCrawlId()
	}
	return strings.Join(out, ",")
}

// waitDeletion views a deleted crawl until its deletion is done, and
// returns the last view.
func waitDeletion(t *testing.T, e env, id string) crawljobs.CrawlView {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		v := e.jobs.View(ctx, e.jobs.Crawl(id))
		if v.Deletion == nil || v.Deletion.Error != "" {
			t.Fatalf("view of %s = %+v, want its deletion's progress", id, v.Deletion)
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

// TestClickHouseUnavailable: with ClickHouse gone, a crawl is still
// created, paused and deleted (the control topic is what decides), its
// view says its counts are unavailable, and its deletion says why its rows
// could not be counted or removed instead of failing.
func TestClickHouseUnavailable(t *testing.T) {
	e := newEnv(t, unreachableStore(t))
	ctx := t.Context()
	e.create(t, "c1")
	v := e.jobs.View(ctx, e.jobs.Crawl("c1"))
	if v.Counts != nil || !strings.HasPrefix(v.CountsError, "counts unavailable: ") || v.Status != "running" {
		t.Errorf("view = counts %+v, error %q, status %q; want no counts, why, running", v.Counts, v.CountsError, v.Status)
	}
	if v, err := e.jobs.SetState(ctx, "c1", crawlv1.CrawlState_CRAWL_STATE_PAUSED); err != nil || v.State != "paused" {
		t.Errorf("pause: %+v, %v", v, err)
	}
	deleted, err := e.jobs.Delete(ctx, "c1")
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if d := deleted.Deletion; deleted.Status != jobs.StatusDeleted || d == nil || d.Done || d.RowsLeft != nil || !strings.HasPrefix(d.Error, "clickhouse: ") {
		t.Errorf("deleted = %+v with %+v, want deleted, not done, the clickhouse error", deleted, d)
	}
	if got := e.published(t, "c1"); len(got) != 3 || !crawlcontrol.Deleted(last(got)) {
		t.Errorf("control topic: %d revisions, want 3, the last deleted", len(got))
	}
	if d := e.jobs.View(ctx, e.jobs.Crawl("c1")).Deletion; d == nil || d.Done || !strings.HasPrefix(d.Error, "clickhouse: ") {
		t.Errorf("view's deletion = %+v, want the clickhouse error", d)
	}
}

// unreachableStore returns a store opened on the test ClickHouse through a
// TCP relay that is then shut: the store's address is a closed local port
// and its connections are cut, as when the server goes away.
func unreachableStore(t *testing.T) *chstore.Store {
	t.Helper()
	cfg := chtest.Config(t)
	server := cfg.Addr[0]
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		accepting, relaying sync.WaitGroup
		mu                  sync.Mutex
		conns               []net.Conn
	)
	accepting.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := (&net.Dialer{}).DialContext(t.Context(), "tcp", server)
			if err != nil {
				t.Errorf("relay: dial clickhouse: %v", err)
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, s)
			mu.Unlock()
			relaying.Go(func() { _, _ = io.Copy(s, c); s.Close() })
			relaying.Go(func() { _, _ = io.Copy(c, s); c.Close() })
		}
	})
	cfg.Addr = []string{ln.Addr().String()}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	store, err := chstore.Open(ctx, cfg, zap.NewNop())
	ln.Close()
	accepting.Wait()
	mu.Lock()
	for _, c := range conns {
		c.Close()
	}
	mu.Unlock()
	relaying.Wait()
	if err != nil {
		t.Fatalf("open store through the relay: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() }) // its connections are cut
	return store
}
