package chstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// TestLoadRobots: LoadRobots returns, for one partition and one agent, the
// latest robots.txt of each origin unless it has expired: an older
// unexpired version never stands in for a newer expired one, repeated
// inserts come back once, other partitions and agents stay out (a row
// compiled for several agents is its first agent's), and the columns
// (sitemaps included) come back as written.
func TestLoadRobots(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := chtest.NewStore(t)
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	row := func(p uint16, origin, agent string, fetched, expires time.Time) chstore.RobotsRow {
		return chstore.RobotsRow{
			Partition: p, Origin: origin, Host: origin[len("http://"):], Agent: agent, Outcome: "parsed", Status: 200,
			Rules: "User-agent: *\nDisallow: /" + origin[len("http://"):] + "\n", CrawlDelayMs: 1500,
			Sitemaps: []string{origin + "/a.xml", origin + "/b.xml"}, BodyBytes: 321,
			FetchedAt: fetched, Expires: expires, Fetcher: "f1",
		}
	}
	hour := time.Hour
	var rows []chstore.RobotsRow
	for i := range 5 {
		o := fmt.Sprintf("http://h%d.test", i)
		rows = append(rows, row(3, o, "trawl", now.Add(-time.Duration(i)*hour), now.Add(24*hour-time.Duration(i)*hour)))
	}
	rows = append(rows,
		row(3, "http://h0.test", "trawl", now.Add(-2*hour), now.Add(22*hour)),                         // older version of h0
		row(3, "http://expired.test", "trawl", now.Add(-25*hour), now.Add(-hour)),                     // expired
		row(3, "http://replaced.test", "trawl", now.Add(-20*hour), now.Add(4*hour)),                   // unexpired, but…
		row(3, "http://replaced.test", "trawl", now.Add(-hour), now.Add(-time.Minute)),                // …its newer version expired
		row(3, "http://other-agent.test", "otherbot", now.Add(-hour), now.Add(23*hour)),               // another agent
		row(3, "http://several.test", "trawl,examplebot", now.Add(-45*time.Minute), now.Add(23*hour)), // trawl's, with another agent's
		row(3, "http://prefix.test", "trawlbot,trawl", now.Add(-hour), now.Add(23*hour)),              // trawlbot's (trawl is not first)
		row(4, "http://other-partition.test", "trawl", now.Add(-hour), now.Add(23*hour)),              // another partition
		row(3, "http://h1.test", "trawl", now.Add(-1*hour), now.Add(24*hour-1*hour)),                  // repeated insert
		chstore.RobotsRow{Partition: 3, Origin: "http://allow.test", Host: "allow.test", Agent: "trawl", Outcome: "allow_all",
			Status: 404, FetchedAt: now.Add(-30 * time.Minute), Expires: now.Add(23 * hour)}, // nil sitemaps
	)
	w := chstore.NewBatchWriter(s, chstore.RobotsTxt, chstore.BatchOptions{MaxRows: 4}, zaptest.NewLogger(t), nil)
	stop := runWriter(t, w)
	if err := w.Write(ctx, rows...); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name      string
		partition int
		agent     string
		limit     int
		want      []string // origins, most recently fetched first
	}{
		{"partition 3", 3, "trawl", 0, []string{"http://h0.test", "http://allow.test", "http://several.test", "http://h1.test", "http://h2.test", "http://h3.test", "http://h4.test"}},
		{"limit keeps the most recent", 3, "trawl", 2, []string{"http://h0.test", "http://allow.test"}},
		{"other agent", 3, "otherbot", 0, []string{"http://other-agent.test"}},
		{"first of several agents", 3, "trawlbot", 0, []string{"http://prefix.test"}},
		{"second of several agents", 3, "examplebot", 0, nil},
		{"other partition", 4, "trawl", 0, []string{"http://other-partition.test"}},
		{"empty partition", 9, "trawl", 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []chstore.RobotsRow
			if err := s.LoadRobots(ctx, tt.partition, tt.agent, now, tt.limit, func(r chstore.RobotsRow) { got = append(got, r) }); err != nil {
				t.Fatal(err)
			}
			var origins []string
			for _, r := range got {
				origins = append(origins, r.Origin)
			}
			if !slices.Equal(origins, tt.want) {
				t.Fatalf("origins = %v, want %v", origins, tt.want)
			}
			for _, r := range got {
				var want chstore.RobotsRow
				for _, w := range rows {
					if w.Origin == r.Origin && w.Agent == r.Agent && !w.FetchedAt.After(r.FetchedAt) && (want.Origin == "" || w.FetchedAt.After(want.FetchedAt)) {
						want = w
					}
				}
				if want.Sitemaps == nil {
					want.Sitemaps = []string{}
				}
				if r.Partition != want.Partition || r.Host != want.Host || r.Outcome != want.Outcome || r.Status != want.Status ||
					r.Rules != want.Rules || r.CrawlDelayMs != want.CrawlDelayMs || !slices.Equal(r.Sitemaps, want.Sitemaps) ||
					r.BodyBytes != want.BodyBytes || !r.FetchedAt.Equal(want.FetchedAt) || !r.Expires.Equal(want.Expires) || r.Fetcher != want.Fetcher {
					t.Errorf("row of %s = %+v, want %+v", r.Origin, r, want)
				}
			}
		})
	}
	if err := s.LoadRobots(ctx, 70000, "trawl", now, 0, func(chstore.RobotsRow) {}); err == nil {
		t.Error("LoadRobots(70000): want out-of-range error")
	}
}
