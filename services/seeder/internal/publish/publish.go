// Package publish is the seeder's Kafka adapter: it turns seeds into
// DiscoveredURL records on the discovered topic, keyed by politeness key so
// that each lands on its host's partition.
package publish

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// Writer produces records and returns once every one is acknowledged by all
// in-sync replicas (kafkaio.Writer). Safe for concurrent use.
type Writer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// BatchSize is how many seeds go into one Write call, bounding the memory
// of encoded records for very large seed lists.
const BatchSize = 1000

// Seeds publishes every url (canonical) as a depth-0 SOURCE_SEED
// DiscoveredURL of crawl crawlID, discovered at now. It returns how many
// were published; on error the first published records stay published
// (the scheduler deduplicates a re-run).
func Seeds(ctx context.Context, w Writer, topic, crawlID string, urls []string, now time.Time) (int, error) {
	seeds := make([]Seed, len(urls))
	for i, u := range urls {
		seeds[i] = Seed{URL: u}
	}
	return Marked(ctx, w, topic, crawlID, seeds, now)
}

// Seed is a seed URL (canonical) and, for a search-engine result page, the
// engine whose result links the parser keeps (DiscoveredURL.serp_engine),
// or, for a URL of a sitemap, its lastmod.
type Seed struct {
	URL        string
	SERPEngine string
	Sitemap    bool      // listed in a sitemap: source SITEMAP instead of SEED
	Lastmod    time.Time // the sitemap's lastmod; zero when none
	// Priority is the sitemap's <priority> (0 to 1) when HasPriority:
	// DiscoveredURL.sitemap_priority, unset when the entry has none.
	Priority    float32
	HasPriority bool
}

// Marked is Seeds for seeds that may be marked as result pages.
func Marked(ctx context.Context, w Writer, topic, crawlID string, seeds []Seed, now time.Time) (int, error) {
	at := timestamppb.New(now)
	published := 0
	batch := make([]kafka.Message, 0, min(len(seeds), BatchSize))
	for i, s := range seeds {
		u := s.URL
		key, err := kafkaio.Key(u)
		if err != nil {
			return published, fmt.Errorf("key seed %q: %w", u, err)
		}
		d := &crawlv1.DiscoveredURL{
			CrawlId:      crawlID,
			Url:          u,
			Depth:        0,
			DiscoveredAt: at,
			Source:       crawlv1.Source_SOURCE_SEED,
			SerpEngine:   s.SERPEngine,
		}
		if s.Sitemap {
			d.Source = crawlv1.Source_SOURCE_SITEMAP
			if !s.Lastmod.IsZero() {
				d.Lastmod = timestamppb.New(s.Lastmod)
			}
			if s.HasPriority {
				d.SitemapPriority = proto.Float32(s.Priority)
			}
		}
		msg, err := kafkaio.NewMessage(topic, key, d)
		if err != nil {
			return published, fmt.Errorf("encode seed %q: %w", u, err)
		}
		batch = append(batch, msg)
		if len(batch) == BatchSize || i == len(seeds)-1 {
			if err := w.Write(ctx, batch...); err != nil {
				return published, fmt.Errorf("publish %d seeds: %w", len(batch), err)
			}
			published += len(batch)
			batch = batch[:0]
		}
	}
	return published, nil
}
