package stats_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// TestPartitions reads the partitions of a crawl's admitted URLs.
func TestPartitions(t *testing.T) {
	s := chtest.NewStore(t)
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	rows := []chstore.SeenRow{
		{CrawlID: "c", Partition: 7, FP: 1, URL: "http://127.0.0.2/a", FirstSeen: now},
		{CrawlID: "c", Partition: 2, FP: 2, URL: "http://127.0.0.3/a", FirstSeen: now},
		{CrawlID: "c", Partition: 7, FP: 3, URL: "http://127.0.0.2/b", FirstSeen: now},
		{CrawlID: "other", Partition: 5, FP: 4, URL: "http://127.0.0.4/", FirstSeen: now},
	}
	b, err := s.Conn().PrepareBatch(ctx, "INSERT INTO "+chstore.URLSeen.Name+" ("+strings.Join(chstore.URLSeen.Columns, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := b.Append(chstore.URLSeen.Values(r)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	st := stats.New(s)
	for _, tt := range []struct {
		crawl string
		want  []int
	}{{"c", []int{2, 7}}, {"other", []int{5}}, {"none", []int{}}} {
		got, err := st.Partitions(ctx, tt.crawl)
		if err != nil || !slices.Equal(got, tt.want) || got == nil {
			t.Errorf("Partitions(%s) = %v, %v; want %v", tt.crawl, got, err, tt.want)
		}
	}
}
