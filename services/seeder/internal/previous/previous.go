// Package previous seeds an incremental re-crawl (seed 003): the pages an
// earlier crawl of the same sites fetched (CrawlSpec.previous_crawl_id) are
// published to the discovered topic as URLs of the new crawl, each with its
// depth, the validators of its last answer (ETag, Last-Modified) and the
// crawl whose documents row holds its text. The fetchers ask for them
// conditionally; a 304 carries the earlier document over (the parser's
// documents_carried) and needs no links, since every page the earlier crawl
// reached is seeded here; a page that changed is fetched in full and its
// new links followed as usual.
//
// The pages are read in one stream (chstore.Store.PreviousPages) and
// published in batches of publish.BatchSize, so memory holds one batch
// whatever the crawl's size. Publishing is at least once: a run that
// fails part-way is run again from the start, and the scheduler drops the
// repeats as duplicates.
package previous

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/publish"
)

// Source reads an earlier crawl's pages (chstore.Store). PreviousPages
// blocks while it streams, calling fn on its goroutine; CarriedFrom
// answers while a stream is open. Safe for concurrent use.
type Source interface {
	PreviousPages(ctx context.Context, crawlID string, fn func(chstore.PreviousPage) error) error
	CarriedFrom(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error)
}

// Summary is what a run published.
type Summary struct {
	Published   int // URLs published (repeats of a URL included)
	Validators  int // of which with an ETag or a Last-Modified: asked for conditionally
	CarriedOver int // of which the earlier crawl had carried over itself (a 304 there)
}

// Publish publishes the pages prev fetched as DiscoveredURLs of crawlID,
// discovered at now, with source PREVIOUS_CRAWL, but those in skip (the
// crawl's search-engine result pages: seeds that must reach the parser
// marked with their engine, which fetch_log does not keep). A page prev
// carried over from a crawl before it keeps that crawl as its document
// crawl, so that a chain of re-crawls always points at the crawl holding
// the text.
func Publish(ctx context.Context, src Source, w publish.Writer, topic, crawlID, prev string, skip map[string]bool, now time.Time) (Summary, error) {
	if prev == "" || prev == crawlID {
		return Summary{}, fmt.Errorf("seed from previous crawl %q of crawl %q: want another crawl", prev, crawlID)
	}
	p := &publisher{src: src, w: w, topic: topic, crawlID: crawlID, prev: prev, skip: skip, at: timestamppb.New(now)}
	add := func(pg chstore.PreviousPage) error { return p.add(ctx, pg) }
	if err := src.PreviousPages(ctx, prev, add); err != nil {
		return p.sum, fmt.Errorf("seed from previous crawl %s: %w", prev, err)
	}
	if err := p.flush(ctx); err != nil {
		return p.sum, fmt.Errorf("seed from previous crawl %s: %w", prev, err)
	}
	return p.sum, nil
}

// publisher batches the pages of one run.
type publisher struct {
	src            Source
	w              publish.Writer
	topic, crawlID string
	prev           string
	skip           map[string]bool
	at             *timestamppb.Timestamp
	batch          []chstore.PreviousPage
	sum            Summary
}

// add queues one page, publishing the batch when it is full.
func (p *publisher) add(ctx context.Context, pg chstore.PreviousPage) error {
	if p.skip[pg.URL] {
		return nil
	}
	p.batch = append(p.batch, pg)
	if len(p.batch) < publish.BatchSize {
		return nil
	}
	return p.flush(ctx)
}

// flush publishes the queued pages: their document crawls looked up in one
// read for those prev carried over, then one write.
func (p *publisher) flush(ctx context.Context) error {
	if len(p.batch) == 0 {
		return nil
	}
	var fps []uint64
	for _, pg := range p.batch {
		if pg.Status == 304 {
			fps = append(fps, fingerprint.URL(p.prev, pg.URL))
		}
	}
	from, err := p.src.CarriedFrom(ctx, p.prev, fps)
	if err != nil {
		return err
	}
	msgs := make([]kafka.Message, 0, len(p.batch))
	var sum Summary
	for _, pg := range p.batch {
		key, err := kafkaio.Key(pg.URL)
		if err != nil {
			continue // not crawlable any more (the canonicalizer changed): the scheduler would drop it
		}
		doc := p.prev
		if pg.Status == 304 {
			if f := from[fingerprint.URL(p.prev, pg.URL)]; f != "" {
				doc = f
				sum.CarriedOver++
			}
		}
		m, err := kafkaio.NewMessage(p.topic, key, &crawlv1.DiscoveredURL{
			CrawlId:         p.crawlID,
			Url:             pg.URL,
			Depth:           uint32(pg.Depth),
			DiscoveredAt:    p.at,
			Source:          crawlv1.Source_SOURCE_PREVIOUS_CRAWL,
			Etag:            pg.ETag,
			LastModified:    pg.LastModified,
			DocumentCrawlId: doc,
		})
		if err != nil {
			return fmt.Errorf("encode %s: %w", pg.URL, err)
		}
		if pg.ETag != "" || pg.LastModified != "" {
			sum.Validators++
		}
		msgs = append(msgs, m)
	}
	if err := p.w.Write(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d urls: %w", len(msgs), err)
	}
	p.sum.Published += len(msgs)
	p.sum.Validators += sum.Validators
	p.sum.CarriedOver += sum.CarriedOver
	p.batch = p.batch[:0]
	return nil
}
