package chstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

type analystQuery struct {
	name, sql string
}

// readAnalystQueries parses testdata/analyst_queries.sql: blocks start with
// "-- name: <name>", comment lines are skipped, a query ends with ";".
func readAnalystQueries(t *testing.T) []analystQuery {
	t.Helper()
	f, err := os.Open("testdata/analyst_queries.sql")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		qs   []analystQuery
		name string
		body []string
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "-- name:"):
			if name != "" {
				t.Fatalf("query %s has no terminating ';'", name)
			}
			name = strings.TrimSpace(strings.TrimPrefix(line, "-- name:"))
		case strings.HasPrefix(line, "--"), name == "" && strings.TrimSpace(line) == "":
		case name == "":
			t.Fatalf("line outside a named query: %q", line)
		default:
			body = append(body, line)
			if strings.HasSuffix(line, ";") {
				qs = append(qs, analystQuery{name: name, sql: strings.Join(body, "\n")})
				name, body = "", nil
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if name != "" {
		t.Fatalf("query %s has no terminating ';'", name)
	}
	return qs
}

// TestAnalystQueries runs every documented analyst query against a migrated
// database holding a little of everything; each must succeed and return
// rows. The docs must contain every query verbatim.
func TestAnalystQueries(t *testing.T) {
	qs := readAnalystQueries(t)
	if len(qs) < 8 {
		t.Fatalf("found %d queries in testdata/analyst_queries.sql", len(qs))
	}
	docs, err := os.ReadFile("../../docs/analyst-queries.md")
	if err != nil {
		t.Fatalf("read docs: %v", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s := chtest.NewStore(t)
	now := time.Now().Truncate(time.Second)
	var (
		fetches []chstore.FetchLogRow
		seen    []chstore.SeenRow
		docsRow []chstore.DocumentRow
	)
	for i := range 300 {
		crawl := []string{"crawl-1", "crawl-2"}[i%2]
		f := fetchRow(crawl, i)
		f.FetchedAt = now.Add(-time.Duration(i) * time.Second)
		fetches = append(fetches, f)
		sr := seenRow(crawl, i%4, i)
		sr.FP = f.URLFP
		seen = append(seen, sr)
		if f.Status == 200 {
			d := docRow(crawl, i)
			d.FetchedAt = f.FetchedAt
			docsRow = append(docsRow, d)
		}
	}
	for i := range fetches[:60] { // archived (--warc-dir)
		fetches[i].WarcFile, fetches[i].WarcOffset = fmt.Sprintf("trawl-20261125100000-%05d-f1.warc.gz", i%3+1), uint64(i)*1500
	}
	write(ctx, t, s, chstore.FetchLog, fetches)
	write(ctx, t, s, chstore.FetchLog, fetches[:20]) // redelivered
	var warcs []chstore.WarcFileRow
	for i := range 3 {
		warcs = append(warcs, chstore.WarcFileRow{File: fmt.Sprintf("trawl-20261125100000-%05d-f1.warc.gz", i+1), Dir: "/data/warc",
			Fetcher: "f1", OpenedAt: now.Add(-time.Hour), ClosedAt: now, Bytes: 1 << 30, Records: 90, Responses: 20})
	}
	write(ctx, t, s, chstore.WarcFiles, warcs)
	write(ctx, t, s, chstore.URLSeen, seen)
	write(ctx, t, s, chstore.Documents, docsRow)
	var nears []chstore.NearDuplicateRow
	for _, d := range docsRow[1:4] {
		nears = append(nears, chstore.NearDuplicateRow{CrawlID: d.CrawlID, URL: d.URL, URLFP: d.URLFP, Host: d.Host,
			NearDuplicateOf: docsRow[0].URL, Distance: 2, Simhash: 0xfeed, FoundAt: now})
	}
	write(ctx, t, s, chstore.NearDuplicates, nears)
	var links []chstore.LinkRow
	for i, f := range fetches[:40] {
		links = append(links, chstore.LinkRow{CrawlID: "crawl-1", TargetHost: "h1.test", TargetURL: "http://h1.test/p/1", TargetFP: 1,
			SourceHost: f.Host, SourceURL: f.URL, SourceFP: f.URLFP, Position: uint16(i%3 + 1),
			AnchorText: []string{"home", "page one", ""}[i%3], Depth: 1, FoundAt: now})
	}
	write(ctx, t, s, chstore.Links, links)

	for _, q := range qs {
		t.Run(q.name, func(t *testing.T) {
			if !strings.Contains(string(docs), q.sql) {
				t.Errorf("docs/analyst-queries.md lacks query %s verbatim", q.name)
			}
			rows, err := s.Conn().Query(ctx, strings.TrimSuffix(q.sql, ";"))
			if err != nil {
				t.Fatalf("query: %v", err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var dest []any
				for _, ct := range rows.ColumnTypes() {
					dest = append(dest, reflect.New(ct.ScanType()).Interface())
				}
				if err := rows.Scan(dest...); err != nil {
					t.Fatalf("scan: %v", err)
				}
				n++
			}
			if err := rows.Err(); err != nil {
				t.Fatalf("rows: %v", err)
			}
			if n == 0 {
				t.Errorf("no rows")
			}
		})
	}
}

func write[T any](ctx context.Context, t *testing.T, s *chstore.Store, tbl chstore.Table[T], rows []T) {
	t.Helper()
	w := chstore.NewBatchWriter(s, tbl, chstore.BatchOptions{MaxRows: len(rows)}, zaptest.NewLogger(t), nil)
	stop := runWriter(t, w)
	if err := w.Write(ctx, rows...); err != nil {
		t.Fatalf("write %s: %v", tbl.Name, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
