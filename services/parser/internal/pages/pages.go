// Package pages is the parser's transport adapter: it consumes fetched pages
// from Kafka, runs the pure extractor on the HTML ones (and the sitemap
// parser on sitemaps), applies the crawl's scope rules, publishes outlinks
// to the discovered topic and documents to the documents topic, stores
// documents, duplicates and dropped-link counts in ClickHouse, and
// acknowledges each record only once all of that is durable.
//
// Files: pages.go (the interfaces of the sinks and the spec source,
// syncSpecs, Sinks, Processor, Assign), config.go (Config: flags, defaults,
// Validate), handle.go (a partition's handler: Handle decodes a batch,
// parses it, looks up duplicates, publishes, stores in the background and
// acks; Close), process.go (one page: classified, extracted, its outlinks
// scoped, its document built), sitemap.go (the URLs a sitemap lists),
// duplicates.go (exact duplicates), near.go (near duplicates), content.go
// (content fingerprints claimed recently), lookup.go (lookups coalesced
// across partitions), metrics.go (outcomes, drop reasons, Metrics).
package pages

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/fieldrules"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/doctext"
	"github.com/trawl-crawler/trawl/services/parser/internal/recent"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
	"github.com/trawl-crawler/trawl/services/parser/internal/traps"
)

// Publisher produces records and returns once every one is acknowledged by
// all in-sync replicas (kafkaio.Writer). Safe for concurrent use.
type Publisher interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// Writer stores rows and returns once they are inserted
// (chstore.BatchWriter). Safe for concurrent use.
type Writer[T any] interface {
	Write(ctx context.Context, rows ...T) error
}

// ContentIndex answers which content fingerprints a crawl has already
// seen, and at which URL first (chstore.Store.SeenContent).
type ContentIndex interface {
	SeenContent(ctx context.Context, crawlID string, fps []uint64) (map[uint64]string, error)
}

// SpecSource returns a crawl's specification or nil (crawlcontrol.Specs):
// Get as published, Scoped with its scope grants (the sites its seeds
// redirected to) folded into its seed sites.
type SpecSource interface {
	Get(crawlID string) *crawlv1.CrawlSpec
	Scoped(crawlID string) *crawlv1.CrawlSpec
}

// scopeSyncer is a SpecSource that can catch up with the control topic
// (crawlcontrol.Specs.Sync).
type scopeSyncer interface {
	Sync(ctx context.Context) error
}

// specSyncer is a SpecSource that can wait for a specification on its way
// (crawlcontrol.Specs.GetSynced).
type specSyncer interface {
	GetSynced(ctx context.Context, crawlID string) (*crawlv1.CrawlSpec, error)
}

// syncSpecs makes sure the specification of every crawl of the batch is
// known before its pages are parsed: a page parsed before its crawl's
// scope arrived would publish links the scope excludes. Then, when a
// page that yields links is on a host off its crawl's known sites, it
// catches up with the control topic (once per batch): the page was
// fetched, so its host was in scope, by a scope grant (a seed redirected
// there) that this parser's follower has not read yet. The scheduler
// writes a grant, acks=all, before the first fetch request of its site,
// so after the catch-up the grant is known, on whichever parser the
// partition is, however late its follower: the page keeps its site's
// links. A catch-up that fails (but for ctx) is logged, and the batch is
// parsed on the scope known.
func (p *Processor) syncSpecs(ctx context.Context, pages []*crawlv1.FetchedPage) error {
	syncer, ok := p.specs.(specSyncer)
	if !ok {
		return nil
	}
	var done []string
	for _, page := range pages {
		id := page.GetCrawlId()
		if slices.Contains(done, id) {
			continue
		}
		done = append(done, id)
		if _, err := syncer.GetSynced(ctx, id); err != nil {
			return fmt.Errorf("wait for the specification of crawl %s: %w", id, err)
		}
	}
	scoper, ok := p.specs.(scopeSyncer)
	if !ok || !slices.ContainsFunc(pages, p.offSites) {
		return nil
	}
	p.metrics.scopeSyncs.Inc()
	sctx, cancel := context.WithTimeout(ctx, crawlcontrol.SyncTimeout)
	defer cancel()
	if err := scoper.Sync(sctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("catch up with the control topic: %w", err)
		}
		p.log.Warn("control topic not caught up, parsing on the scope known", zap.Error(err))
	}
	return nil
}

// offSites reports whether a page that yields links (a 2xx answer) is on
// a host off the sites its crawl stays on, by the scope known now.
func (p *Processor) offSites(page *crawlv1.FetchedPage) bool {
	if page.GetErrorKind() != "" || page.GetStatusCode() < 200 || page.GetStatusCode() > 299 {
		return false
	}
	spec := p.specs.Scoped(page.GetCrawlId())
	if spec.GetScope() == nil {
		return false
	}
	host, err := urlcanon.PolitenessKey(page.GetUrl())
	if err != nil {
		return false
	}
	return !p.rules.Rules(page.GetCrawlId(), spec).OnSeedSites(host)
}

// Sinks are where the processor's output goes.
type Sinks struct {
	Publisher   Publisher // outlinks and documents
	Documents   Writer[chstore.DocumentRow]
	Meta        Writer[chstore.DocumentMetaRow]
	ContentSeen Writer[chstore.ContentSeenRow]
	Dropped     Writer[chstore.LinksDroppedRow]
	Seen        ContentIndex
	Bands       Writer[chstore.SimhashBandRow]   // near-duplicate index (nil: none kept)
	NearDups    Writer[chstore.NearDuplicateRow] // documents found near an earlier one
	Near        NearIndex                        // nil: no near-duplicate detection
	Links       Writer[chstore.LinkRow]          // the link graph (nil: not kept)
	Carried     Writer[chstore.CarriedRow]       // pages found unchanged since an earlier crawl
}

// Processor turns fetched pages into outlinks and documents. It is stateless
// between records (beyond compiled rules) and safe for concurrent use: the
// group runs one handler per partition, all sharing it.
type Processor struct {
	cfg     Config
	topics  kafkaio.Topics
	sinks   Sinks
	specs   SpecSource
	rules   *scope.Cache
	fields  *crawlsettings.Compiled[*fieldrules.Set]
	docs    *doctext.Extractor // PDFs and office files; its PDF runtime starts on the first PDF
	engines *serp.Engines
	recent  *recent.Links // nil: off
	content *recentContent
	near    *recentNear
	resolve *urlcanon.ResolveCache // nil: off
	traps   *traps.Detector
	log     *zap.Logger
	metrics *Metrics
	now     func() time.Time
}

// NewProcessor returns a processor publishing to topics.Discovered and
// topics.Documents. specs may be nil (every crawl runs with the flags'
// defaults), engines may be nil (no result-page handling). now stamps
// discovered_at (time.Now in production).
func NewProcessor(cfg Config, topics kafkaio.Topics, sinks Sinks, specs SpecSource, engines *serp.Engines,
	log *zap.Logger, m *Metrics, now func() time.Time) *Processor {
	rules := scope.NewCache(scope.Defaults{
		MaxOutlinks:         cfg.MaxOutlinks,
		MaxURLLength:        cfg.MaxURLLength,
		MaxRepeatedSegments: cfg.MaxRepeatedSegments,
		FollowDuplicates:    cfg.FollowDuplicates,
		NearDistance:        cfg.NearDistance,
		FollowTraps:         cfg.TrapAllowance == 0,
	}, func(crawlID string, err error) {
		log.Warn("crawl scope partly invalid", telemetry.Crawl(crawlID), zap.Error(err))
	})
	if sinks.Seen != nil {
		sinks.Seen = newCoalescedIndex(sinks.Seen, lookupWindow)
	}
	if sinks.Near != nil {
		sinks.Near = newCoalescedNear(sinks.Near, nearLookupWindow)
	}
	return &Processor{cfg: cfg, topics: topics, sinks: sinks, specs: specs, rules: rules, fields: newFieldRules(log),
		docs: doctext.New(doctext.Config{CacheDir: cfg.PDFCacheDir}), engines: engines,
		recent: recent.New(cfg.RecentLinks), content: newRecentContent(recentContentSize), near: newRecentNear(recentNearSize), resolve: urlcanon.NewResolveCache(cfg.ResolveCache),
		traps: traps.NewDetector(0), log: log, metrics: m, now: now}
}

// Close releases what the processor holds beyond memory: the PDF runtime,
// if a PDF started it. Call it once the consumer group has stopped.
func (p *Processor) Close() error { return p.docs.Close() }

// Assign is the kafkaio.AssignFunc of the parser's consumer group.
func (p *Processor) Assign(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
	log := p.log.With(telemetry.Topic(topic), telemetry.Partition(partition))
	return &handler{p: p, log: log, stores: kafkaio.NewLater(ctx, log)}, nil
}
