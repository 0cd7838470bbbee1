package launcher

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/trawl-crawler/trawl/libs/chlocal"
)

// TestReadMerges: with a part_log (--clickhouse-part-log), the bench reads
// each table's inserts and what its merges read from a real server, and
// prints them; without one it reads nothing and says nothing.
func TestReadMerges(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, partLog := range []bool{true, false} {
		t.Run(fmt.Sprintf("part_log=%v", partLog), func(t *testing.T) {
			srv, err := chlocal.StartWith(ctx, t.TempDir(), chlocal.Options{PartLog: partLog})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = srv.Stop() }()
			conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}, Auth: clickhouse.Auth{Database: "default"}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			since := time.Now().Add(-time.Second)
			for _, q := range []string{
				"CREATE TABLE small (k UInt64, v String) ENGINE = MergeTree ORDER BY k",
				"CREATE TABLE other (k UInt64) ENGINE = MergeTree ORDER BY k",
				"INSERT INTO other SELECT 1",
			} {
				if err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			const inserts, rowsEach = 6, 100
			for i := range inserts {
				if err := conn.Exec(ctx, fmt.Sprintf("INSERT INTO small SELECT number + %d, 'x' FROM system.numbers LIMIT %d", i*rowsEach, rowsEach)); err != nil {
					t.Fatal(err)
				}
			}
			if err := conn.Exec(ctx, "OPTIMIZE TABLE small FINAL"); err != nil {
				t.Fatal(err)
			}
			// The server adds a merge to the log once the merged part is
			// committed, which may be just after OPTIMIZE returns: read
			// again until it is there, or for 10 s.
			var merges []TableMerges
			wait, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				if merges, err = readMerges(ctx, conn, since); err != nil {
					t.Fatal(err)
				}
				if !partLog || (len(merges) > 0 && merges[0].Merges > 0) {
					break
				}
				select {
				case <-wait.Done():
				case <-tick.C:
					continue
				}
				break
			}
			b := Bench{Merges: merges}
			var out bytes.Buffer
			b.Print(&out)
			if !partLog {
				if len(merges) != 0 || strings.Contains(out.String(), "merges per table") {
					t.Errorf("without a part_log: %+v\n%s", merges, out.String())
				}
				return
			}
			if len(merges) != 2 || merges[0].Name != "small" || merges[1].Name != "other" {
				t.Fatalf("merges %+v, want small (merged) then other", merges)
			}
			s := merges[0]
			if s.Inserts != inserts || s.InsertedRows != inserts*rowsEach {
				t.Errorf("small inserted %d parts, %d rows; want %d parts of %d rows", s.Inserts, s.InsertedRows, inserts, rowsEach)
			}
			// OPTIMIZE FINAL reads every row at least once, whatever the
			// background merges did before it; a row is read at most once
			// per merge, and there are at most inserts-1 merges.
			if s.Merges < 1 || s.MergedRows < inserts*rowsEach || s.MergedRows > (inserts-1)*inserts*rowsEach || s.MergedBytes == 0 {
				t.Errorf("small: %d merges read %d rows, %d bytes; want at least one reading all %d rows", s.Merges, s.MergedRows, s.MergedBytes, inserts*rowsEach)
			}
			if o := merges[1]; o.Inserts != 1 || o.InsertedRows != 1 || o.Merges != 0 {
				t.Errorf("other: %+v, want one part of one row, no merge", o)
			}
			if want := fmt.Sprintf("%-22s %8d %10d", "small", inserts, inserts*rowsEach); !strings.Contains(out.String(), "merges per table") || !strings.Contains(out.String(), want) {
				t.Errorf("bench output lacks the merges table (%q):\n%s", want, out.String())
			}
		})
	}
}
