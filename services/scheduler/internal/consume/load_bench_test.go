package consume

import (
	"context"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/scheduler/internal/dedup"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// BenchmarkLoadSeen10M times what Assign does for a partition of ten million
// fingerprints: stream them from url_seen (chstore.LoadSeen) into a fresh
// seen set. The rows are inserted once, server-side (INSERT … SELECT), into
// the benchmark's own database; only the load is timed. Run with
//
//	go test -run '^$' -bench LoadSeen10M -benchtime 3x ./internal/consume
func BenchmarkLoadSeen10M(b *testing.B) {
	const n = 10_000_000
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	s := chtest.NewStore(b)
	err := s.Conn().Exec(ctx, `INSERT INTO url_seen (crawl_id, partition, fp, url, depth, first_seen)
		SELECT 'bench', 3, cityHash64(number), concat('http://bench.test/', toString(number)), 1, now()
		FROM system.numbers LIMIT 10000000`)
	if err != nil {
		b.Fatal(err)
	}
	var set *dedup.Set
	b.ResetTimer()
	for b.Loop() {
		set = dedup.New(0)
		if err := s.LoadSeen(ctx, 3, nil, func(_ string, fp uint64) { set.Add(fp) }); err != nil {
			b.Fatal(err)
		}
		if set.Len() != n {
			b.Fatalf("loaded %d fingerprints, want %d", set.Len(), n)
		}
	}
	perLoad := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(perLoad, "s/load")
	b.ReportMetric(float64(n)/perLoad, "fps/s")
	b.ReportMetric(float64(set.Bytes())/float64(set.Len()), "bytes/URL")
}
