// Package app assembles the parser from its configuration: New opens
// ClickHouse (migrated), makes sure the topics exist, and builds the Kafka
// writer, one batch writer per table the parser fills, the page processor
// (pages) and its consumer group, and the table of crawl specifications
// it reads. cmd/parser adds the parts to the service's run group; Close
// releases the clients once the group is done.
package app

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/parser/internal/config"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
)

// Name is the service's name: its metric prefix, its log field and its
// consumer group's id.
const Name = "parser"

// Parser is the parser's parts, built from its configuration.
type Parser struct {
	cfg     config.Config
	log     *zap.Logger
	store   *chstore.Store
	writer  *kafkaio.Writer
	specs   *crawlcontrol.Specs
	group   *kafkaio.Group
	proc    *pages.Processor
	writers []Writer
}

// Writer is a ClickHouse batch writer as the run group sees it: Run
// flushes batches until its context is done, then flushes what is
// buffered.
type Writer struct {
	Name string // "<table> writer"
	Run  func(ctx context.Context) error
}

// New builds the parser: ClickHouse opened and migrated, the topics
// created, every part constructed but nothing running yet. engines are
// the search engines whose result pages it reads (serp.Load). On error,
// what was opened is closed again.
func New(ctx context.Context, cfg config.Config, engines *serp.Engines, log *zap.Logger, reg prometheus.Registerer) (_ *Parser, err error) {
	p := &Parser{cfg: cfg, log: log, specs: crawlcontrol.NewSpecs()}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	// ClickHouse waited for while it is down, migrated; the topics created.
	if p.store, err = service.Bootstrap(ctx, cfg.ClickHouse, cfg.Kafka, log, reg); err != nil {
		return nil, err
	}
	topics := cfg.Kafka.Topics()
	// A batch's links fill a produce request per partition (kafkaio.LargeWriteBatch).
	p.writer = kafkaio.NewWriter(cfg.Kafka, log, reg, kafkaio.WithBatchSize(kafkaio.LargeWriteBatch))
	store, batch := p.store, cfg.ClickHouse.Batch()
	docs := chstore.NewBatchWriter(store, chstore.Documents, DocumentBatch(batch), log, reg)
	meta := chstore.NewBatchWriter(store, chstore.DocumentMeta, batch, log, reg)
	contentSeen := chstore.NewBatchWriter(store, chstore.ContentSeen, batch, log, reg)
	dropped := chstore.NewBatchWriter(store, chstore.LinksDropped, batch, log, reg)
	bands := chstore.NewBatchWriter(store, chstore.SimhashBands, batch, log, reg)
	nearDups := chstore.NewBatchWriter(store, chstore.NearDuplicates, batch, log, reg)
	links := chstore.NewBatchWriter(store, chstore.Links, batch, log, reg)
	carried := chstore.NewBatchWriter(store, chstore.DocumentsCarried, batch, log, reg)
	p.writers = []Writer{
		{"documents writer", docs.Run},
		{"document_meta writer", meta.Run},
		{"content_seen writer", contentSeen.Run},
		{"links_dropped writer", dropped.Run},
		{"simhash_bands writer", bands.Run},
		{"near_duplicates writer", nearDups.Run},
		{"links writer", links.Run},
		{"documents_carried writer", carried.Run},
	}
	metrics, err := pages.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	p.proc = pages.NewProcessor(cfg.Parser, topics, pages.Sinks{
		Publisher: p.writer, Documents: docs, Meta: meta, ContentSeen: contentSeen, Dropped: dropped, Seen: store,
		Bands: bands, NearDups: nearDups, Near: store, Links: links, Carried: carried,
	}, p.specs, engines, log, metrics, time.Now)
	proc := p.proc
	flush := chstore.FlushEach(docs, meta, contentSeen, dropped, bands, nearDups, links, carried)
	p.group, err = kafkaio.NewGroup(cfg.Kafka, kafkaio.GroupConfig{
		GroupID:  cfg.Kafka.GroupFor(Name),
		Topic:    topics.Fetched,
		MaxBatch: cfg.Parser.BatchSize,
		// A partition acks a batch once its rows are inserted. Without
		// OnFull it parsed at most MaxInFlight pages per flush interval:
		// at four batches (200) and 2 s flushes, 100 pages/s per
		// partition, and a crawl of 2 000 hosts whose fetcher ran at
		// 3 000 pages/s waited 2 minutes for its parser. Now its writers
		// insert when a window fills, so the window bounds a batch, not
		// the rate. The records' payloads are not kept (kafkaio.AckRefs);
		// their documents are, until inserted, bounded by the documents
		// writer (DocumentBatch: Write blocks while 2 × DocumentBatchBytes
		// wait).
		MaxInFlight: window(cfg.Parser.BatchSize),
		OnFull:      flush,
		OnClose:     flush,
	}, proc.Assign, log, reg)
	if err != nil {
		return nil, fmt.Errorf("create consumer group: %w", err)
	}
	return p, nil
}

// windowPages is how many pages of a partition may be unacked (parsed and
// waiting for their rows' insert, or read ahead), whatever the batch size:
// sixteen batches of the default size. The rows of a window are what the
// parser holds beyond the batch it parses; with ClickHouse slower than the
// parse they wait in memory (the documents writer takes 1 000 documents),
// up to a window per partition. A window of 800 pages measured the same
// speed and peak memory on six busy hosts, but filled four times as often,
// and each fill is an insert into every table (4.7 rows merged per row
// inserted against 2.4).
const windowPages = 16 * pages.DefaultBatchSize

// window is a partition's window for batches of batchSize pages: at least
// two batches, so that one is parsed while the other's rows are inserted.
func window(batchSize int) int { return max(windowPages, 2*batchSize) }

// DocumentBatch returns the batching of the documents writer from the
// shared one: a document row carries the page's text (up to
// --max-text-bytes, 7-16 KB on the bench web), so an insert takes at most
// pages.DocumentBatchRows of them and pages.DocumentBatchBytes of their
// bytes, and twice that may wait, so that the parser's memory stays
// bounded in bytes when ClickHouse is slower than the parse (its stores
// then block, its batches stay unacked and the group stops reading).
func DocumentBatch(o chstore.BatchOptions) chstore.BatchOptions {
	o.MaxRows = min(max(o.MaxRows, 1), pages.DocumentBatchRows)
	o.MaxBuffered = 2 * o.MaxRows
	o.MaxBytes = pages.DocumentBatchBytes
	o.MaxBufferedBytes = 2 * pages.DocumentBatchBytes
	return o
}

// Ping checks ClickHouse (the readiness check).
func (p *Parser) Ping(ctx context.Context) error { return p.store.Ping(ctx) }

// KafkaCheck fails while the producer waits for the broker (readiness).
func (p *Parser) KafkaCheck(ctx context.Context) error { return p.writer.Check(ctx) }

// Parse runs the consumer group of fetched pages until ctx is done.
func (p *Parser) Parse(ctx context.Context) error { return p.group.Run(ctx) }

// FollowSpecs reads the control topic into the crawl specifications until
// ctx is done.
func (p *Parser) FollowSpecs(ctx context.Context) error {
	return crawlcontrol.Follow(ctx, p.cfg.Kafka, p.specs, func(err error) { p.log.Warn("crawl spec skipped", zap.Error(err)) })
}

// Writers returns the ClickHouse batch writers, one per table.
func (p *Parser) Writers() []Writer { return p.writers }

// Close closes the Kafka writer and ClickHouse, logging what fails; call
// it once every part has stopped.
func (p *Parser) Close() {
	if p.proc != nil {
		if err := p.proc.Close(); err != nil {
			p.log.Warn("close the document reader", zap.Error(err))
		}
	}
	if p.writer != nil {
		if err := p.writer.Close(); err != nil {
			p.log.Warn("close kafka writer", zap.Error(err))
		}
	}
	if p.store != nil {
		if err := p.store.Close(); err != nil {
			p.log.Warn("close clickhouse", zap.Error(err))
		}
	}
}
