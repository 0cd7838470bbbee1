package emit

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

const robotsBody = `User-agent: *
Disallow: /private

User-agent: trawl
Disallow: /secret
Crawl-delay: 2.5

User-agent: examplebot
Disallow: /other

Sitemap: http://A.example/sitemap.xml
Sitemap: not a url
Sitemap: http://b.example:80/more.xml
`

// answer is a robots.txt getter that answers every request with res.
type answer httpfetch.Response

func (a *answer) Fetch(context.Context, httpfetch.Request) *httpfetch.Response {
	res := httpfetch.Response(*a)
	return &res
}

// fetchRobots returns the rules of http://a.example as the cache fetches
// them from a server answering status and body, for trawl and examplebot.
func fetchRobots(t *testing.T, status int, body string) *robots.Rules {
	t.Helper()
	c := robots.NewCache(&answer{Status: status, Body: []byte(body)}, func() time.Time { return now }, robots.Options{UserAgent: "trawl/1.0"})
	c.NoteAgent("examplebot")
	return c.Fetch(t.Context(), "http://a.example", "a.example")
}

// TestRobotsRow: the row of a fetched robots.txt holds its rules for every
// agent it was compiled for, and reads back (RobotsRecord) as the record
// the cache made of it; an unavailable one has no row.
func TestRobotsRow(t *testing.T) {
	rules := fetchRobots(t, 200, robotsBody)
	row, ok := newEncoder().RobotsRow(7, "a.example", rules)
	if !ok {
		t.Fatal("no row of a parsed robots.txt")
	}
	if row.Partition != 7 || row.Origin != "http://a.example" || row.Host != "a.example" || row.Agent != "trawl,examplebot" ||
		row.Outcome != string(robots.Parsed) || row.Status != 200 || row.CrawlDelayMs != 2500 || row.Fetcher != "f-1" ||
		!row.FetchedAt.Equal(now) || !row.Expires.Equal(now.Add(robots.DefaultTTL)) || row.BodyBytes != uint32(len(robotsBody)) {
		t.Errorf("row %+v", row)
	}
	if !strings.Contains(row.Rules, "/secret") || !strings.Contains(row.Rules, "/other") {
		t.Errorf("rules column %q, want trawl's and examplebot's rules", row.Rules)
	}
	want, _ := rules.Record()
	if got := RobotsRecord(row); !reflect.DeepEqual(got, want) {
		t.Errorf("row reads back as\n%+v\nwant\n%+v", got, want)
	}

	if _, ok := newEncoder().RobotsRow(7, "a.example", fetchRobots(t, 503, "")); ok {
		t.Error("a row of an unavailable robots.txt")
	}
}

// TestSitemaps: the Sitemap lines of a robots.txt are URLs discovered by
// the request that fetched it, canonical, keyed by their own host.
func TestSitemaps(t *testing.T) {
	req := &crawlv1.FetchRequest{CrawlId: "c1", Url: "http://a.example/p", Depth: 2}
	msgs := newEncoder().Sitemaps(req, fetchRobots(t, 200, robotsBody))
	if got, want := where(msgs), []string{"discovered a.example", "discovered b.example"}; !slices.Equal(got, want) {
		t.Fatalf("sitemaps %q, want %q", got, want)
	}
	var urls []string
	for _, m := range msgs {
		var d crawlv1.DiscoveredURL
		if err := kafkaio.Decode(m, &d); err != nil {
			t.Fatal(err)
		}
		if d.GetCrawlId() != "c1" || d.GetDepth() != 2 || d.GetParentUrl() != "http://a.example/robots.txt" ||
			d.GetSource() != crawlv1.Source_SOURCE_SITEMAP || !d.GetDiscoveredAt().AsTime().Equal(now) {
			t.Errorf("sitemap %v", &d)
		}
		urls = append(urls, d.GetUrl())
	}
	if want := []string{"http://a.example/sitemap.xml", "http://b.example/more.xml"}; !slices.Equal(urls, want) {
		t.Errorf("sitemap URLs %q, want %q", urls, want)
	}

	var many strings.Builder
	for range maxSitemaps + 10 {
		many.WriteString("Sitemap: http://a.example/s.xml\n")
	}
	if n := len(newEncoder().Sitemaps(req, fetchRobots(t, 200, many.String()))); n != maxSitemaps {
		t.Errorf("%d sitemaps published of %d lines, want %d", n, maxSitemaps+10, maxSitemaps)
	}
	if msgs := newEncoder().Sitemaps(req, fetchRobots(t, 404, "")); msgs != nil {
		t.Errorf("sitemaps of a robots.txt without any: %q", where(msgs))
	}
}
