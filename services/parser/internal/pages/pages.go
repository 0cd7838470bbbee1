// Package pages is the parser's transport adapter: it consumes fetched pages
// from Kafka, runs the pure extractor on the HTML ones, publishes their
// outlinks to the discovered topic, stores their documents in ClickHouse,
// and acknowledges each record only once all of that is durable.
package pages

import (
	"context"
	"flag"
	"fmt"
	"mime"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
)

// Config tunes the processor.
type Config struct {
	MaxOutlinks  int // flag max-outlinks: links published per page (default 1000)
	MaxTextBytes int // flag max-text-bytes: visible text stored per page (default 1 MiB)
	BatchSize    int // flag batch-size: fetched pages handled together per partition (default 100)
}

// Defaults of Config.
const (
	DefaultBatchSize = 100
)

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxOutlinks, "max-outlinks", extract.DefaultMaxOutlinks, "outlinks published per page; the rest are dropped and counted")
	fs.IntVar(&c.MaxTextBytes, "max-text-bytes", extract.DefaultMaxTextBytes, "visible text stored per page, in bytes (cut on a UTF-8 boundary)")
	fs.IntVar(&c.BatchSize, "batch-size", DefaultBatchSize, "fetched pages handled together per partition (bounds memory: batch-size × body size)")
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case c.MaxOutlinks < 1:
		return fmt.Errorf("validate max-outlinks %d: want at least 1", c.MaxOutlinks)
	case c.MaxTextBytes < 1:
		return fmt.Errorf("validate max-text-bytes %d: want at least 1", c.MaxTextBytes)
	case c.BatchSize < 1:
		return fmt.Errorf("validate batch-size %d: want at least 1", c.BatchSize)
	}
	return nil
}

// Publisher produces records and returns once every one is acknowledged by
// all in-sync replicas (kafkaio.Writer). Safe for concurrent use.
type Publisher interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// DocumentWriter stores rows and returns once they are inserted
// (chstore.BatchWriter). Safe for concurrent use.
type DocumentWriter interface {
	Write(ctx context.Context, rows ...chstore.DocumentRow) error
}

// Processor turns fetched pages into outlinks and documents. It is stateless
// between records and safe for concurrent use: the group runs one handler
// per partition, all sharing it.
type Processor struct {
	cfg        Config
	discovered string // topic of the outlinks
	pub        Publisher
	docs       DocumentWriter
	log        *zap.Logger
	metrics    *Metrics
	now        func() time.Time
}

// NewProcessor returns a processor publishing outlinks to topic discovered.
// now stamps discovered_at (time.Now in production).
func NewProcessor(cfg Config, discovered string, pub Publisher, docs DocumentWriter, log *zap.Logger, m *Metrics, now func() time.Time) *Processor {
	return &Processor{cfg: cfg, discovered: discovered, pub: pub, docs: docs, log: log, metrics: m, now: now}
}

// Assign is the kafkaio.AssignFunc of the parser's consumer group.
func (p *Processor) Assign(_ context.Context, topic string, partition int) (kafkaio.Handler, error) {
	return &handler{p: p, log: p.log.With(telemetry.Topic(topic), telemetry.Partition(partition))}, nil
}

// handler handles one partition. Handle does all the work of a batch before
// returning, so nothing is in flight between calls.
type handler struct {
	p   *Processor
	log *zap.Logger
}

// Handle processes a batch: extract every HTML page, publish all outlinks
// in one Write, store all documents in one Write, then ack every record.
// On a publish or store error nothing is acked: the records are redelivered
// (at least once), and the error stops the partition.
func (h *handler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	var (
		msgs []kafka.Message
		docs []chstore.DocumentRow
	)
	for _, rec := range batch {
		var page crawlv1.FetchedPage
		if err := kafkaio.Decode(rec, &page); err != nil {
			h.log.Warn("undecodable record skipped", telemetry.Offset(rec.Offset), zap.Error(err))
			h.p.metrics.pages.WithLabelValues(OutcomeUndecodable).Inc()
			continue
		}
		out, doc, outcome := h.p.process(&page)
		if outcome == OutcomeInvalidURL {
			h.log.Warn("page with invalid url skipped", telemetry.URL(page.GetUrl()), telemetry.Offset(rec.Offset))
		}
		h.p.metrics.pages.WithLabelValues(outcome).Inc()
		msgs = append(msgs, out...)
		if doc != nil {
			docs = append(docs, *doc)
		}
	}
	if len(msgs) > 0 {
		if err := h.p.pub.Write(ctx, msgs...); err != nil {
			return fmt.Errorf("publish %d outlinks: %w", len(msgs), err)
		}
		h.p.metrics.links.Add(float64(len(msgs)))
	}
	if len(docs) > 0 {
		if err := h.p.docs.Write(ctx, docs...); err != nil {
			return fmt.Errorf("store %d documents: %w", len(docs), err)
		}
		h.p.metrics.documents.Add(float64(len(docs)))
	}
	for _, rec := range batch {
		ack(rec)
	}
	return nil
}

// Close has nothing to finish: Handle is synchronous.
func (h *handler) Close(context.Context) error { return nil }

// process classifies one page and, for an HTML page, extracts it into
// outlink records and a document row (nil under noindex).
func (p *Processor) process(page *crawlv1.FetchedPage) ([]kafka.Message, *chstore.DocumentRow, string) {
	switch {
	case page.GetErrorKind() != "":
		return nil, nil, OutcomeFetchError
	case page.GetStatusCode() < 200 || page.GetStatusCode() > 299:
		return nil, nil, OutcomeHTTPStatus
	case !IsHTML(page.GetContentType()):
		return nil, nil, OutcomeNotHTML
	}
	pageURL, err := urlcanon.Canonicalize(page.GetUrl())
	if err != nil {
		return nil, nil, OutcomeInvalidURL
	}
	start := time.Now()
	res, err := extract.Extract(pageURL, page.GetBody(), extract.Options{
		MaxOutlinks:  p.cfg.MaxOutlinks,
		MaxTextBytes: p.cfg.MaxTextBytes,
	})
	p.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, nil, OutcomeInvalidURL
	}
	for reason, n := range res.Dropped {
		p.metrics.dropped.WithLabelValues(reason).Add(float64(n))
	}
	// The X-Robots-Tag header carries the same directives as the meta tag.
	if tag, ok := page.GetHeaders()["x-robots-tag"]; ok {
		nofollow, noindex := extract.ParseRobotsDirectives(tag)
		if nofollow {
			res.Links = nil
		}
		res.NoIndex = res.NoIndex || noindex
	}

	now := timestamppb.New(p.now())
	msgs := make([]kafka.Message, 0, len(res.Links))
	for _, l := range res.Links {
		key, err := kafkaio.Key(l.URL)
		if err != nil {
			p.metrics.dropped.WithLabelValues(DropKey).Inc()
			continue
		}
		msg, err := kafkaio.NewMessage(p.discovered, key, &crawlv1.DiscoveredURL{
			CrawlId:      page.GetCrawlId(),
			Url:          l.URL,
			Depth:        page.GetDepth() + 1,
			ParentUrl:    pageURL,
			DiscoveredAt: now,
			Source:       crawlv1.Source_SOURCE_LINK,
			AnchorText:   l.Anchor,
			Rel:          l.Rel,
		})
		if err != nil {
			p.metrics.dropped.WithLabelValues(DropKey).Inc()
			continue
		}
		msgs = append(msgs, msg)
	}
	if res.NoIndex {
		return msgs, nil, OutcomeNoIndex
	}

	urlFP := page.GetUrlFp()
	if urlFP == 0 {
		urlFP = fingerprint.URL(page.GetCrawlId(), pageURL)
	}
	host, _ := urlcanon.PolitenessKey(pageURL) // pageURL is canonical: cannot fail
	lang := res.Language
	if lang == "" {
		lang = headerLanguage(page.GetHeaders()["content-language"])
	}
	return msgs, &chstore.DocumentRow{
		CrawlID:     page.GetCrawlId(),
		URL:         pageURL,
		URLFP:       urlFP,
		Host:        host,
		FetchedAt:   page.GetFetchedAt().AsTime(),
		Status:      uint16(page.GetStatusCode()),
		Title:       res.Title,
		Text:        res.Text,
		ContentFP:   fingerprint.String(res.Text),
		Outlinks:    uint32(len(msgs)),
		ContentType: mediaType(page.GetContentType()),
		Language:    lang,
	}, OutcomeDocument
}

// IsHTML reports whether a Content-Type (with or without parameters) is
// an HTML media type the parser extracts.
func IsHTML(contentType string) bool {
	switch mediaType(contentType) {
	case "text/html", "application/xhtml+xml":
		return true
	}
	return false
}

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// headerLanguage is the first language of a Content-Language header.
func headerLanguage(v string) string {
	first, _, _ := strings.Cut(v, ",")
	first = strings.ToLower(strings.TrimSpace(first))
	if len(first) > 35 {
		return ""
	}
	return first
}
