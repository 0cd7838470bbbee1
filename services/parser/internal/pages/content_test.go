package pages_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestDuplicateOfPageBeingStored: a page whose content matches a page of an
// earlier batch is marked its duplicate even while that batch's
// content_seen row is not inserted yet (its writer flushes every 10s).
func TestDuplicateOfPageBeingStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	slow := chstore.BatchOptions{FlushInterval: 10 * time.Second}
	docs := chstore.NewBatchWriter(store, chstore.Documents, slow, log, nil)
	seen := chstore.NewBatchWriter(store, chstore.ContentSeen, slow, log, nil)
	runWriters(t, docs, seen)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, FollowDuplicates: true, PublishDocuments: true},
		pages.Sinks{Documents: docs, ContentSeen: seen, Seen: store}, now)

	text := "<html><body><p>The same article, mirrored on two paths of one host.</p></body></html>"
	r.produce(ctx, htmlPage("http://127.0.0.2/a", 1, text, now))
	first := readDocuments(t, ctx, r.kc, 1)
	r.produce(ctx, htmlPage("http://127.0.0.2/b", 1, text, now))
	both := readDocuments(t, ctx, r.kc, 2)
	var n uint64
	if err := store.Conn().QueryRow(ctx, "SELECT count() FROM content_seen_v2").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("premise: content_seen already holds %d rows before its first flush", n)
	}
	if first[0].IsDuplicate {
		t.Errorf("first page marked duplicate of %s", first[0].DuplicateOf)
	}
	b := both[1]
	if !b.IsDuplicate || b.DuplicateOf != "http://127.0.0.2/a" {
		t.Errorf("second page: duplicate %v of %q, want a duplicate of http://127.0.0.2/a", b.IsDuplicate, b.DuplicateOf)
	}
}

// TestMirrorKeepsItsLinks: with follow_duplicates off (every crawl spec's
// default), a page whose text repeats a page of another host (a mirror)
// is marked a duplicate but keeps its links, which lead into its own
// site; a page repeating a page of its own host (a copy, or a trap that
// serves one text at ever new URLs) does not.
func TestMirrorKeepsItsLinks(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	fast := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	docs := chstore.NewBatchWriter(store, chstore.Documents, fast, log, nil)
	seen := chstore.NewBatchWriter(store, chstore.ContentSeen, fast, log, nil)
	runWriters(t, docs, seen)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, PublishDocuments: true},
		pages.Sinks{Documents: docs, ContentSeen: seen, Seen: store}, now)
	page := func(links ...string) string {
		var b strings.Builder
		b.WriteString("<html><body><p>The same article, on a site and on its mirror.</p>")
		for _, l := range links {
			b.WriteString(`<a href="` + l + `">more</a>`)
		}
		return b.String() + "</body></html>"
	}
	r.produce(ctx, htmlPage("http://127.0.0.2/a", 1, page("/x", "/y"), now))
	readDocuments(t, ctx, r.kc, 1)
	r.produce(ctx, htmlPage("http://127.0.0.3/a", 1, page("/x", "/y"), now))      // the mirror: relative links, its own URLs
	r.produce(ctx, htmlPage("http://127.0.0.2/copy", 1, page("/z1", "/z2"), now)) // a copy on the same host
	got := readDocuments(t, ctx, r.kc, 3)
	for _, d := range got[1:] {
		if !d.IsDuplicate {
			t.Errorf("%s not marked a duplicate", d.Url)
		}
	}
	discovered := map[string]bool{}
	err := kafkaio.ReadToEnd(ctx, r.kc, r.kc.Topics().Discovered, kafkaio.ReadOptions{}, func(m kafka.Message) {
		var u crawlv1.DiscoveredURL
		if kafkaio.Decode(m, &u) == nil {
			discovered[u.GetUrl()] = true
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://127.0.0.2/x", "http://127.0.0.2/y", "http://127.0.0.3/x", "http://127.0.0.3/y"} {
		if !discovered[u] {
			t.Errorf("%s not published: a mirror on another host keeps its links", u)
		}
	}
	for _, u := range []string{"http://127.0.0.2/z1", "http://127.0.0.2/z2"} {
		if discovered[u] {
			t.Errorf("%s published: the links of a copy on the same host are not followed", u)
		}
	}
}

// TestFailedStoreLeavesBatchUnacked: when the documents cannot be stored the
// batch is never acked (nothing committed) and the partition's next batch
// fails the group run.
func TestFailedStoreLeavesBatchUnacked(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	store := chtest.NewStore(t)
	broken := chstore.NewBatchWriter(store, chstore.Documents, chstore.BatchOptions{}, zaptest.NewLogger(t), nil)
	stopped, stopBroken := context.WithCancel(ctx)
	stopBroken()
	if err := broken.Run(stopped); err != nil { // stopped: every Write fails
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, PublishDocuments: true},
		pages.Sinks{Documents: broken}, now)
	r.produce(ctx, htmlPage("http://127.0.0.2/a", 1, "<p>first</p>", now))
	readDocuments(t, ctx, r.kc, 1) // published before the store failed
	r.produce(ctx, htmlPage("http://127.0.0.2/b", 1, "<p>second</p>", now))
	select {
	case err := <-r.done:
		if err == nil || !strings.Contains(err.Error(), "store 1 documents") {
			t.Fatalf("group run = %v, want the store failure", err)
		}
	case <-ctx.Done():
		t.Fatal("group run did not fail")
	}
	if lag := r.lag(ctx); lag != 2 {
		t.Errorf("lag = %d, want 2: nothing committed", lag)
	}
}

// readDocuments reads the documents topic until n documents arrived, in
// offset order (one host: one partition).
func readDocuments(t *testing.T, ctx context.Context, kc kafkaio.Config, n int) []*crawlv1.Document {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out []*crawlv1.Document
	err := kafkaio.Follow(rctx, kc, kc.Topics().Documents, func(m kafka.Message) {
		var d crawlv1.Document
		if err := kafkaio.Decode(m, &d); err != nil {
			t.Errorf("decode document: %v", err)
			return
		}
		out = append(out, &d)
		if len(out) == n {
			cancel()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != n {
		t.Fatalf("read %d documents, want %d", len(out), n)
	}
	return out
}
