package chstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// BenchmarkLoadSeen reloads a partition of one million fingerprints, as a
// scheduler does when a rebalance hands it the partition.
func BenchmarkLoadSeen(b *testing.B) {
	const n = 1_000_000
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	s := chtest.NewStore(b)
	// Fill with INSERT … SELECT on the server: the benchmark is the read.
	err := s.Conn().Exec(ctx, `INSERT INTO url_seen (crawl_id, partition, fp, url, depth, first_seen)
		SELECT 'bench', 7, cityHash64(number), concat('http://bench.test/', toString(number)), 1, now()
		FROM system.numbers LIMIT 1000000`)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		got := 0
		if err := s.LoadSeen(ctx, 7, nil, func(string, uint64) { got++ }); err != nil {
			b.Fatal(err)
		}
		if got != n {
			b.Fatalf("loaded %d fingerprints, want %d", got, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkBatchWriterInsert inserts fetch_log rows in batches of 100k
// through a BatchWriter (one Write per batch).
func BenchmarkBatchWriterInsert(b *testing.B) {
	const batch = 100_000
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	s := chtest.NewStore(b)
	w := chstore.NewBatchWriter(s, chstore.FetchLog, chstore.BatchOptions{MaxRows: batch, MaxBuffered: batch}, nil, nil)
	stop := runWriter(b, w)
	defer func() {
		if err := stop(); err != nil {
			b.Error(err)
		}
	}()
	rows := make([]chstore.FetchLogRow, batch)
	for i := range rows {
		rows[i] = fetchRow("bench", i)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for j := range rows {
			rows[j].Attempt = uint16(i) // distinct rows each round
		}
		if err := w.Write(ctx, rows...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batch)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkDocumentsInsert inserts documents as the parser does: batches
// of 200 rows whose text is 16 KiB (the bench web's average), one insert
// per batch. B/op is what the driver allocates per batch: its column
// and encode buffers, which a connection keeps or not between inserts.
func BenchmarkDocumentsInsert(b *testing.B) {
	const batch = 200
	ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
	defer cancel()
	s := chtest.NewStore(b)
	w := chstore.NewBatchWriter(s, chstore.Documents, chstore.BatchOptions{MaxRows: batch, MaxBuffered: batch}, nil, nil)
	stop := runWriter(b, w)
	defer func() {
		if err := stop(); err != nil {
			b.Error(err)
		}
	}()
	text := strings.Repeat("lorem ipsum dolor sit amet ", 16<<10/27)
	rows := make([]chstore.DocumentRow, batch)
	for i := range rows {
		rows[i] = chstore.DocumentRow{CrawlID: "bench", URL: fmt.Sprintf("http://bench.test/%d", i), URLFP: uint64(i),
			Host: "bench.test", FetchedAt: time.Now(), Status: 200, Title: "a title", Text: text, ContentType: "text/html"}
	}
	b.SetBytes(int64(batch * len(text)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range rows {
			rows[j].URLFP = uint64(i*batch + j) // distinct rows each round
		}
		if err := w.Write(ctx, rows...); err != nil {
			b.Fatal(err)
		}
	}
}
