package progress

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

func TestPollDrainSummary(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	kc := kafkatest.Config(t, 4)
	store := chtest.NewStore(t)

	// Three discovered URLs that no scheduler consumes: lag 3.
	w := kafkaio.NewWriter(kc, zap.NewNop(), nil)
	defer w.Close()
	for _, u := range []string{"http://a.test/", "http://b.test/", "http://c.test/"} {
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := kafkaio.NewMessage(kc.Topics().Discovered, key, &crawlv1.DiscoveredURL{CrawlId: "c1", Url: u})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, msg); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	now := time.Now().UTC().Truncate(time.Second)
	rows := []struct {
		crawl, url string
		status     uint16
		kind       string
	}{
		{"c1", "http://a.test/1", 200, ""},
		{"c1", "http://a.test/2", 0, "connect"},
		{"c1", "http://a.test/3", 301, "redirect"},
		{"c1", "http://a.test/5", 304, ""},
		{"c2", "http://a.test/4", 200, ""},
	}
	var fetches []chstore.FetchLogRow
	for i, r := range rows {
		row := chstore.FetchLogRow{CrawlID: r.crawl, URL: r.url, URLFP: uint64(i + 1), Host: "a.test", Attempt: 1,
			FetchedAt: now, Status: r.status, ErrorKind: r.kind, Bytes: 100, ContentType: "text/html", Fetcher: "f"}
		fetches = append(fetches, row, row) // inserted twice: the poll counts both, the summary one
	}
	insertRows(t, ctx, store, chstore.FetchLog, fetches)
	insertRows(t, ctx, store, chstore.Documents, []chstore.DocumentRow{{CrawlID: "c1", URL: "http://a.test/1", URLFP: 1,
		Host: "a.test", FetchedAt: now, Status: 200, Title: "t", Text: "x", ContentFP: 9, ContentType: "text/html", Language: "en"}})
	carried := chstore.CarriedRow{CrawlID: "c1", URL: "http://a.test/5", URLFP: 4, Host: "a.test", FromCrawl: "c0", FromURLFP: 40, CheckedAt: now}
	insertRows(t, ctx, store, chstore.DocumentsCarried, []chstore.CarriedRow{carried, carried})

	// The scheduler's frontier: c1 holds two pending URLs (one written
	// twice) and one released; c2 one pending. Held URLs are queued work.
	frontier := func(crawl string, fp uint64, state uint8) chstore.FrontierRow {
		return chstore.FrontierRow{Partition: 1, CrawlID: crawl, Host: "a.test", FP: fp, URL: "http://a.test/f", State: state, UpdatedAt: now}
	}
	insertRows(t, ctx, store, chstore.Frontier, []chstore.FrontierRow{
		frontier("c1", 10, chstore.FrontierPending), frontier("c1", 10, chstore.FrontierPending),
		frontier("c1", 11, chstore.FrontierPending),
		frontier("c1", 12, chstore.FrontierPending), frontier("c1", 12, chstore.FrontierReleased),
		frontier("c2", 13, chstore.FrontierPending),
	})

	mon := NewMonitor(kc, store.Conn(), "c1")
	defer mon.Close()
	s, err := mon.Poll(ctx)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	// The poll reads the per-minute rollup (cheap at any crawl size),
	// which counts a row inserted twice twice; the summary is exact.
	if s.Fetched != 8 || s.Errors != 2 {
		t.Errorf("fetched %d errors %d, want 8 and 2 (every row inserted twice)", s.Fetched, s.Errors)
	}
	if s.Lags["scheduler"] != 3 || s.Frontier != 2 || s.Queued() != 5 {
		t.Errorf("lags %v, frontier %d (queued %d), want scheduler 3, frontier 2, total 5 (lag error: %v)", s.Lags, s.Frontier, s.Queued(), s.LagErr)
	}
	if !strings.Contains(s.Line(), "fetched 8") {
		t.Errorf("line %q", s.Line())
	}
	if w := mon.Stats().WaitingMax; w["scheduler"] != 3 {
		t.Errorf("most records waiting %v, want the scheduler's 3", w)
	}

	// While records wait in a topic the frontier is re-read at most every
	// frontierEvery: a URL held since is shown on a later poll.
	insertRows(t, ctx, store, chstore.Frontier, []chstore.FrontierRow{frontier("c1", 14, chstore.FrontierPending)})
	if s, err = mon.Poll(ctx); err != nil || s.Frontier != 2 {
		t.Errorf("second poll: frontier %d (%v), want the count of the first poll, 2", s.Frontier, err)
	}
	mon.frontierAt = mon.frontierAt.Add(-frontierEvery)
	if s, err = mon.Poll(ctx); err != nil || s.Frontier != 3 {
		t.Errorf("poll %v later: frontier %d (%v), want 3", frontierEvery, s.Frontier, err)
	}

	// Not drained while records wait.
	dctx, dcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	var out bytes.Buffer
	_, err = mon.WaitDrained(dctx, DrainConfig{Interval: 200 * time.Millisecond, Display: &Display{Out: &out}})
	dcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitDrained = %v, want deadline exceeded", err)
	}
	if strings.Count(out.String(), "\n") < 2 {
		t.Errorf("display wrote %q, want a line per poll", out.String())
	}
	// A failing check aborts at once.
	boom := errors.New("fetcher exited")
	if _, err := mon.WaitDrained(ctx, DrainConfig{Check: func() error { return boom }}); !errors.Is(err, boom) {
		t.Errorf("WaitDrained with failing check = %v", err)
	}

	sum, err := ReadSummary(ctx, store.Conn(), "c1", 2*time.Second)
	if err != nil {
		t.Fatalf("summary: %v", err)
	}
	if sum.Fetched != 4 || sum.Documents != 1 || sum.ByStatus[200] != 1 || sum.ByError["connect"] != 1 || sum.ByError["redirect"] != 1 ||
		sum.Unchanged != 1 || sum.Carried != 1 || sum.From != "c0" {
		t.Errorf("summary %+v", sum)
	}
	var sb bytes.Buffer
	sum.Print(&sb)
	if !strings.Contains(sb.String(), "connect:1") || !strings.Contains(sb.String(), "unchanged   1 pages answered 304 (not fetched again); 1 documents carried over from crawl c0") {
		t.Errorf("printed summary %q", sb.String())
	}
}

func insertRows[T any](t *testing.T, ctx context.Context, store *chstore.Store, table chstore.Table[T], rows []T) {
	t.Helper()
	b, err := store.Conn().PrepareBatch(ctx, "INSERT INTO "+table.Name+" ("+strings.Join(table.Columns, ", ")+")")
	if err != nil {
		t.Fatalf("prepare insert: %v", err)
	}
	for _, r := range rows {
		if err := b.Append(table.Values(r)...); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatalf("insert into %s: %v", table.Name, err)
	}
}
