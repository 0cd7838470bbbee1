package emit

import (
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// robots.txt: its Sitemap lines as discovered URLs, and its stored form.

// maxSitemaps bounds the Sitemap lines of one robots.txt published.
const maxSitemaps = 50

// Sitemaps returns the Sitemap lines of a freshly fetched robots.txt
// (rules) as DiscoveredURLs (source SITEMAP) of the crawl whose request
// req fetched it, at that request's depth (so a sitemap never widens a
// depth-limited crawl), to be deduplicated and scheduled like any URL:
// at most maxSitemaps, each keyed by its host on the discovered topic. A
// line that is no crawlable URL is left out.
func (e *Encoder) Sitemaps(req *crawlv1.FetchRequest, rules *robots.Rules) []kafka.Message {
	if len(rules.Sitemaps) == 0 {
		return nil
	}
	now := timestamppb.New(e.o.Now())
	var msgs []kafka.Message
	for _, sm := range rules.Sitemaps[:min(len(rules.Sitemaps), maxSitemaps)] {
		u, err := urlcanon.Canonicalize(sm)
		if err != nil {
			continue
		}
		key, err := kafkaio.Key(u)
		if err != nil {
			continue
		}
		m, err := kafkaio.NewMessage(e.o.Topics.Discovered, key, &crawlv1.DiscoveredURL{
			CrawlId:      req.GetCrawlId(),
			Url:          u,
			Depth:        req.GetDepth(),
			ParentUrl:    rules.Origin + "/robots.txt",
			DiscoveredAt: now,
			Source:       crawlv1.Source_SOURCE_SITEMAP,
		})
		if err == nil {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// RobotsRow returns the row that stores rules, the robots.txt of host's
// origin read from partition part, for the next owner of host; ok is false
// when it could not be obtained (an Unavailable result is no valid
// robots.txt).
func (e *Encoder) RobotsRow(part int, host string, rules *robots.Rules) (row rows.RobotsRow, ok bool) {
	rec, ok := rules.Record()
	if !ok {
		return rows.RobotsRow{}, false
	}
	agent, text := rec.Columns()
	return rows.RobotsRow{
		Partition:    uint16(part),
		Origin:       rec.Origin,
		Host:         host,
		Agent:        agent,
		Outcome:      string(rec.Outcome),
		Status:       uint16(min(max(rec.Status, 0), 65535)),
		Rules:        text,
		CrawlDelayMs: uint32(rec.CrawlDelay.Milliseconds()),
		Sitemaps:     rec.Sitemaps,
		BodyBytes:    uint32(max(rec.BodyBytes, 0)),
		FetchedAt:    rec.FetchedAt,
		Expires:      rec.Expires,
		Fetcher:      e.o.Outcome.InstanceID,
	}, true
}

// RobotsRecord is the cache's form of a stored row (its agent and rules
// columns hold the rules of every agent the robots.txt was compiled for:
// robots.Record.Columns).
func RobotsRecord(row rows.RobotsRow) robots.Record {
	rec := robots.Record{
		Origin:     row.Origin,
		Outcome:    robots.Outcome(row.Outcome),
		Status:     int(row.Status),
		CrawlDelay: time.Duration(row.CrawlDelayMs) * time.Millisecond,
		Sitemaps:   row.Sitemaps,
		BodyBytes:  int(row.BodyBytes),
		FetchedAt:  row.FetchedAt,
		Expires:    row.Expires,
	}
	rec.SetColumns(row.Agent, row.Rules)
	return rec
}
