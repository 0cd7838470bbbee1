// Package pages is the parser's transport adapter: it consumes fetched pages
// from Kafka, runs the pure extractor on the HTML ones (and the sitemap
// parser on sitemaps), applies the crawl's scope rules, publishes outlinks
// to the discovered topic and documents to the documents topic, stores
// documents, duplicates and dropped-link counts in ClickHouse, and
// acknowledges each record only once all of that is durable.
package pages

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"mime"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/simhash"
	"github.com/trawl-crawler/trawl/libs/sitemap"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
	"github.com/trawl-crawler/trawl/services/parser/internal/recent"
	"github.com/trawl-crawler/trawl/services/parser/internal/serp"
)

// Config tunes the processor.
type Config struct {
	MaxOutlinks         int    // flag max-outlinks: links published per page (default 1000)
	MaxTextBytes        int    // flag max-text-bytes: visible text stored per page (default 1 MiB)
	BatchSize           int    // flag batch-size: fetched pages handled together per partition (default 100)
	MaxURLLength        int    // flag max-url-length: longest outlink published (default 2048)
	MaxRepeatedSegments int    // flag max-repeated-segments: trap guard (default 3, 0 = off)
	FollowDuplicates    bool   // flag follow-duplicates: for crawls without a spec (default true)
	SERPConfig          string // flag serp-config: JSON file of search engines added to the presets
	RecentLinks         int    // flag recent-links: outlinks remembered as published (0 = off)
	ResolveCache        int    // flag resolve-cache: link resolutions remembered across pages (0 = off)
	PublishDocuments    bool   // flag publish-documents: also produce every document to the documents topic
	NearDistance        int    // flag near-duplicate-distance: simhash bits within which a document nearly duplicates an earlier one, for crawls whose spec does not say (0 = off)
	StoreLinks          bool   // flag store-links: keep every in-scope link of a page in the links table
}

// Defaults of Config.
const (
	DefaultBatchSize = 50
	// DocumentBatchRows is the most documents inserted together.
	DocumentBatchRows          = 500
	DefaultMaxURLLength        = 2048
	DefaultMaxRepeatedSegments = 3
	DefaultRecentLinks         = 1 << 20 // 8 MiB
	DefaultResolveCache        = 1 << 14 // about 4 MiB
)

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxOutlinks, "max-outlinks", extract.DefaultMaxOutlinks, "outlinks published per page; the rest are dropped and counted (a crawl's scope can lower it)")
	fs.IntVar(&c.MaxTextBytes, "max-text-bytes", extract.DefaultMaxTextBytes, "visible text stored per page, in bytes (cut on a UTF-8 boundary)")
	fs.IntVar(&c.BatchSize, "batch-size", DefaultBatchSize, "fetched pages handled together per partition; twice as many may wait for their rows' insert (bounds memory: 2 × batch-size × partitions × page size)")
	fs.IntVar(&c.MaxURLLength, "max-url-length", DefaultMaxURLLength, "longest outlink published, in bytes (a crawl's scope can override it)")
	fs.IntVar(&c.MaxRepeatedSegments, "max-repeated-segments", DefaultMaxRepeatedSegments, "trap guard: drop outlinks whose path repeats one segment more often than this (0 = off)")
	fs.BoolVar(&c.FollowDuplicates, "follow-duplicates", true, "follow the links of pages whose text duplicates an earlier page, for crawls without a spec")
	fs.StringVar(&c.SERPConfig, "serp-config", "", "JSON file of search engines ([{name, url_pattern, results}]) added to the built-in presets")
	fs.IntVar(&c.RecentLinks, "recent-links", DefaultRecentLinks, "outlinks remembered as published, at most (8 bytes each; the table starts at 256 KiB and grows to this) so that a link repeated on many pages is published once; 0 disables")
	fs.BoolVar(&c.PublishDocuments, "publish-documents", false, "also produce every document (text included) to the documents topic, for downstream consumers; ClickHouse's documents table has them either way")
	fs.IntVar(&c.NearDistance, "near-duplicate-distance", 0, fmt.Sprintf("a document whose text's simhash is at most this many bits (%d is usual) from an earlier document's of the crawl is its near duplicate, for crawls whose spec does not set near_duplicate_distance (0 = off, at most %d; it costs about a third more ClickHouse CPU per page)", simhash.NearDistance, simhash.MaxNearDistance))
	fs.BoolVar(&c.StoreLinks, "store-links", false, "keep every in-scope link of a page (source, target, anchor text, rel, position) in ClickHouse's links table: the link graph, about 30 rows per page on the bench web, three times the rows of every other table together")
	fs.IntVar(&c.ResolveCache, "resolve-cache", DefaultResolveCache, "link resolutions remembered across pages (about 200 bytes each), so that a link a site repeats is parsed once; 0 disables")
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
	case c.MaxURLLength < 16 || c.MaxURLLength > urlcanon.MaxLength:
		return fmt.Errorf("validate max-url-length %d: want 16 to %d", c.MaxURLLength, urlcanon.MaxLength)
	case c.MaxRepeatedSegments < 0:
		return fmt.Errorf("validate max-repeated-segments %d: want at least 0", c.MaxRepeatedSegments)
	case c.RecentLinks < 0 || c.RecentLinks > 1<<30:
		return fmt.Errorf("validate recent-links %d: want 0 to %d", c.RecentLinks, 1<<30)
	case c.NearDistance < 0 || c.NearDistance > simhash.MaxNearDistance:
		return fmt.Errorf("validate near-duplicate-distance %d: want 0 to %d", c.NearDistance, simhash.MaxNearDistance)
	case c.ResolveCache < 0 || c.ResolveCache > 1<<26:
		return fmt.Errorf("validate resolve-cache %d: want 0 to %d", c.ResolveCache, 1<<26)
	}
	return nil
}

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

// SpecSource returns a crawl's specification or nil (crawlcontrol.Specs).
type SpecSource interface {
	Get(crawlID string) *crawlv1.CrawlSpec
}

// specSyncer is a SpecSource that can wait for a specification on its way
// (crawlcontrol.Specs.GetSynced).
type specSyncer interface {
	GetSynced(ctx context.Context, crawlID string) (*crawlv1.CrawlSpec, error)
}

// syncSpecs makes sure the specification of every crawl of the batch is
// known before its pages are parsed: a page parsed before its crawl's
// scope arrived would publish links the scope excludes.
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
	return nil
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
	engines *serp.Engines
	recent  *recent.Links // nil: off
	content *recentContent
	near    *recentNear
	resolve *urlcanon.ResolveCache // nil: off
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
	}, func(crawlID string, err error) {
		log.Warn("crawl scope partly invalid", telemetry.Crawl(crawlID), zap.Error(err))
	})
	if sinks.Seen != nil {
		sinks.Seen = newCoalescedIndex(sinks.Seen, lookupWindow)
	}
	if sinks.Near != nil {
		sinks.Near = newCoalescedNear(sinks.Near, nearLookupWindow)
	}
	return &Processor{cfg: cfg, topics: topics, sinks: sinks, specs: specs, rules: rules, engines: engines,
		recent: recent.New(cfg.RecentLinks), content: newRecentContent(recentContentSize), near: newRecentNear(recentNearSize), resolve: urlcanon.NewResolveCache(cfg.ResolveCache),
		log: log, metrics: m, now: now}
}

// Assign is the kafkaio.AssignFunc of the parser's consumer group.
func (p *Processor) Assign(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
	log := p.log.With(telemetry.Topic(topic), telemetry.Partition(partition))
	return &handler{p: p, log: log, stores: kafkaio.NewLater(ctx, log)}, nil
}

// handler handles one partition: Handle parses and publishes a batch, the
// batch's rows are stored in the background (stores) and its records
// acked when they are in.
type handler struct {
	p      *Processor
	log    *zap.Logger
	stores *kafkaio.Later
}

// result is what one fetched page yields.
type result struct {
	outcome   string
	links     []kafka.Message
	linkFPs   []uint64 // fingerprint of each of links
	linkDepth uint32   // depth of the links
	outlinks  int      // links the page has in the crawl's scope, published or not
	doc       *document
	linkRows  []chstore.LinkRow // the page's in-scope links, for the links table
	crawlID   string
	host      string // politeness key of the page
	dropped   map[string]int
	followDup bool
	nearDist  int // the crawl's near-duplicate distance (0: off)
}

// document is a page to store, before duplicate detection.
type document struct {
	row   chstore.DocumentRow
	meta  chstore.DocumentMetaRow
	msg   *crawlv1.Document
	bands []simhash.Band            // its simhash's bands, when it goes into the near-duplicate index
	near  *chstore.NearDuplicateRow // set when it nearly duplicates an earlier document
}

func (r *result) drop(reason string, n int) {
	if n <= 0 {
		return
	}
	if r.dropped == nil {
		r.dropped = make(map[string]int)
	}
	r.dropped[reason] += n
}

// pageBody is the field of a FetchedPage left in its record when decoded:
// the body is read, never changed, and the record is not reused.
var pageBody = (&crawlv1.FetchedPage{}).ProtoReflect().Descriptor().Fields().ByName("body").Number()

// Handle processes a batch: extract every page, mark duplicates, publish
// all outlinks and documents in one Write, then return; the documents,
// metadata, first-seen content and dropped-link counts are stored in the
// background and every record acked once they are in, so the next batch is
// parsed while ClickHouse flushes. On a publish or store error nothing is
// acked: the records are redelivered (at least once), and the error (a
// store's at the next Handle or at Close) stops the partition.
func (h *handler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	if err := h.stores.Err(); err != nil {
		return err
	}
	p := h.p
	pages := make([]*crawlv1.FetchedPage, 0, len(batch))
	offsets := make([]int64, 0, len(batch))
	for _, rec := range batch {
		page := &crawlv1.FetchedPage{}
		if err := kafkaio.DecodeAliasing(rec, page, pageBody); err != nil {
			h.log.Warn("undecodable record skipped", telemetry.Offset(rec.Offset), zap.Error(err))
			p.metrics.pages.WithLabelValues(OutcomeUndecodable).Inc()
			continue
		}
		pages = append(pages, page)
		offsets = append(offsets, rec.Offset)
	}
	if err := p.syncSpecs(ctx, pages); err != nil {
		return err
	}
	results := make([]*result, 0, len(pages))
	for i, page := range pages {
		res := p.process(page)
		if res.outcome == OutcomeInvalidURL {
			h.log.Warn("page with invalid url skipped", telemetry.URL(page.GetUrl()), telemetry.Offset(offsets[i]))
		}
		results = append(results, res)
	}
	// Parsed: the pages (whose bodies point into the records) are not
	// read again, and the lookups and the publish below wait on I/O, with
	// every partition of this parser doing the same.
	clear(pages)
	kafkaio.DropPayloads(batch)
	// The near-duplicate lookup runs beside the exact one: their rounds
	// start together and both answers are in when marking starts.
	var near nearLookup
	var lookups errgroup.Group
	lookups.Go(func() (err error) {
		near, err = p.lookupNear(ctx, results)
		return err
	})
	lookups.Go(func() error { return p.markDuplicates(ctx, results) })
	if err := lookups.Wait(); err != nil {
		return err
	}
	p.markNearDuplicates(results, near)

	var (
		msgs    []kafka.Message
		docs    []chstore.DocumentRow
		metas   []chstore.DocumentMetaRow
		firsts  []chstore.ContentSeenRow
		bands   []chstore.SimhashBandRow
		nears   []chstore.NearDuplicateRow
		links   []chstore.LinkRow
		outlink int
	)
	dropped := make(map[chstore.LinksDroppedRow]uint64)
	minute := p.now().UTC().Truncate(time.Minute)
	batchLinks := make(map[uint64]uint32) // published by this batch: fingerprint -> depth
	for _, r := range results {
		p.metrics.pages.WithLabelValues(r.outcome).Inc()
		links = append(links, r.linkRows...)
		for i, m := range r.links {
			fp := r.linkFPs[i]
			if d, ok := batchLinks[fp]; ok && d <= r.linkDepth {
				r.drop(DropPublished, 1)
				continue
			}
			batchLinks[fp] = r.linkDepth
			msgs = append(msgs, m)
			outlink++
		}
		for reason, n := range r.dropped {
			p.metrics.dropped.WithLabelValues(reason).Add(float64(n))
			dropped[chstore.LinksDroppedRow{CrawlID: r.crawlID, Host: r.host, Reason: reason, Minute: minute}] += uint64(n)
		}
		if r.doc == nil {
			continue
		}
		d := r.doc
		d.row.Outlinks = uint32(r.outlinks)
		d.msg.Outlinks = uint32(r.outlinks)
		docs = append(docs, d.row)
		metas = append(metas, d.meta)
		if !d.meta.IsDuplicate && d.row.Text != "" {
			firsts = append(firsts, chstore.ContentSeenRow{CrawlID: d.row.CrawlID, ContentFP: d.row.ContentFP, URL: d.row.URL, FirstSeen: d.row.FetchedAt})
		}
		bands = append(bands, bandRows(d)...)
		if d.near != nil {
			nears = append(nears, *d.near)
		}
		if !p.cfg.PublishDocuments {
			continue
		}
		m, err := kafkaio.NewMessage(p.topics.Documents, []byte(d.row.Host), d.msg)
		if err != nil {
			return fmt.Errorf("encode document %s: %w", d.row.URL, err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) > 0 {
		if err := p.sinks.Publisher.Write(ctx, msgs...); err != nil {
			return fmt.Errorf("publish %d outlinks and documents: %w", len(msgs), err)
		}
		p.metrics.links.Add(float64(outlink))
		// Durable now: remembered, so later pages do not publish them again.
		for fp, depth := range batchLinks {
			p.recent.Add(fp, depth)
		}
	}
	rows := make([]chstore.LinksDroppedRow, 0, len(dropped))
	for k, n := range dropped {
		k.N = n
		rows = append(rows, k)
	}
	acks := batch // their payloads dropped above
	h.stores.Go(func(ctx context.Context) error {
		if err := p.store(ctx, stored{docs, metas, firsts, rows, bands, nears, links}); err != nil {
			return err
		}
		p.metrics.documents.Add(float64(len(docs)))
		for _, rec := range acks {
			ack(rec)
		}
		return nil
	})
	return nil
}

// stored is what one batch inserts.
type stored struct {
	docs    []chstore.DocumentRow
	metas   []chstore.DocumentMetaRow
	firsts  []chstore.ContentSeenRow
	dropped []chstore.LinksDroppedRow
	bands   []chstore.SimhashBandRow
	nears   []chstore.NearDuplicateRow
	links   []chstore.LinkRow
}

// store inserts a batch's documents, metadata, first-seen content,
// dropped-link counts and near-duplicate index rows, concurrently (each
// writer flushes on its own clock).
func (p *Processor) store(ctx context.Context, s stored) error {
	var g errgroup.Group
	g.Go(func() error { return write(ctx, p.sinks.Documents, s.docs, "documents") })
	g.Go(func() error { return write(ctx, p.sinks.Meta, s.metas, "document metadata") })
	g.Go(func() error { return write(ctx, p.sinks.ContentSeen, s.firsts, "content fingerprints") })
	g.Go(func() error { return write(ctx, p.sinks.Dropped, s.dropped, "dropped link counts") })
	g.Go(func() error { return write(ctx, p.sinks.Bands, s.bands, "simhash bands") })
	g.Go(func() error { return write(ctx, p.sinks.NearDups, s.nears, "near duplicates") })
	g.Go(func() error { return write(ctx, p.sinks.Links, s.links, "links") })
	return g.Wait()
}

// Close waits for the batches being stored (until ctx is done, then
// abandons them unacked: redelivered to the next owner) and returns the
// error of a failed store.
func (h *handler) Close(ctx context.Context) error { return h.stores.Close(ctx) }

func write[T any](ctx context.Context, w Writer[T], rows []T, what string) error {
	if len(rows) == 0 || w == nil {
		return nil
	}
	if err := w.Write(ctx, rows...); err != nil {
		return fmt.Errorf("store %d %s: %w", len(rows), what, err)
	}
	return nil
}

// markDuplicates flags the documents whose content fingerprint the crawl
// has seen before (in ClickHouse, or recently in this process: earlier in
// the batch or in a batch still being persisted) at another URL,
// and drops the links of duplicates when the crawl does not follow them
// (followDup) and the duplicate is on the same host as the page it
// repeats: a copy, or a trap that serves one text at ever new URLs of a
// site. A duplicate on another host (a mirror) keeps its links: they lead
// into its own site, and those already known are dropped as usual (the
// recent-links table here, the seen set in the scheduler).
// Pages with no text are never duplicates.
func (p *Processor) markDuplicates(ctx context.Context, results []*result) error {
	byCrawl := make(map[string][]uint64)
	for _, r := range results {
		if r.doc != nil && r.doc.row.Text != "" {
			byCrawl[r.crawlID] = append(byCrawl[r.crawlID], r.doc.row.ContentFP)
		}
	}
	if len(byCrawl) == 0 || p.sinks.Seen == nil {
		return nil
	}
	first := make(map[string]map[uint64]string, len(byCrawl))
	for crawlID, fps := range byCrawl {
		seen, err := p.sinks.Seen.SeenContent(ctx, crawlID, fps)
		if err != nil {
			return fmt.Errorf("look up content fingerprints: %w", err)
		}
		first[crawlID] = seen
	}
	for _, r := range results {
		if r.doc == nil || r.doc.row.Text == "" {
			continue
		}
		fp, u := r.doc.row.ContentFP, r.doc.row.URL
		// The first URL this process claimed (pages of this batch, of
		// batches still being persisted), else the stored one, else u.
		orig := p.content.claim(contentKey{r.crawlID, fp}, first[r.crawlID][fp], u)
		if orig == u { // the first page, a redelivery or a re-crawl of it
			continue
		}
		r.doc.meta.IsDuplicate, r.doc.meta.DuplicateOf = true, orig
		r.doc.msg.IsDuplicate, r.doc.msg.DuplicateOf = true, orig
		r.outcome = OutcomeDuplicate
		if !r.followDup && sameHost(orig, r.host) {
			r.drop(DropDuplicatePage, len(r.links))
			r.links, r.linkFPs = nil, nil
		}
	}
	return nil
}

// sameHost reports whether the canonical URL u is on host (a politeness
// key).
func sameHost(u, host string) bool {
	k, err := urlcanon.CanonicalKey(u)
	return err == nil && k == host
}

// process classifies one page and extracts it into outlink records and a
// document (nil under noindex and for list, result and sitemap pages). A
// page of a cancelled crawl (by its operator, its time limit or its
// deletion: crawlcontrol.StateAt) yields its document, since it was
// fetched, but no outlink: the crawl discovers nothing more, and its links
// are counted as dropped (DropCancelled).
func (p *Processor) process(page *crawlv1.FetchedPage) *result {
	res := p.extract(page)
	if len(res.links) > 0 && p.cancelled(page.GetCrawlId()) {
		res.drop(DropCancelled, len(res.links))
		res.links, res.linkFPs = nil, nil
	}
	return res
}

// cancelled reports whether a crawl is cancelled now.
func (p *Processor) cancelled(crawlID string) bool {
	if p.specs == nil {
		return false
	}
	return crawlcontrol.StateAt(p.specs.Get(crawlID), p.now()) == crawlv1.CrawlState_CRAWL_STATE_CANCELLED
}

// extract is process before the crawl's state is applied.
func (p *Processor) extract(page *crawlv1.FetchedPage) *result {
	res := &result{crawlID: page.GetCrawlId()}
	mt := mediaType(page.GetContentType())
	switch {
	case page.GetErrorKind() != "":
		res.outcome = OutcomeFetchError
		return res
	case page.GetStatusCode() < 200 || page.GetStatusCode() > 299:
		res.outcome = OutcomeHTTPStatus
		return res
	}
	pageURL, err := urlcanon.Canonicalize(page.GetUrl())
	if err != nil {
		res.outcome = OutcomeInvalidURL
		return res
	}
	res.host, _ = urlcanon.CanonicalKey(pageURL) // pageURL is canonical: cannot fail
	var spec *crawlv1.CrawlSpec
	if p.specs != nil {
		spec = p.specs.Get(page.GetCrawlId())
	}
	rules := p.rules.Rules(page.GetCrawlId(), spec)
	res.followDup = rules.FollowDuplicates()
	res.nearDist = rules.NearDistance()

	if !isHTMLType(mt) {
		if u, err := url.Parse(pageURL); err == nil && sitemap.Is(mt, u.Path) {
			p.sitemap(page, pageURL, rules, res)
			return res
		}
		res.outcome = OutcomeNotHTML
		return res
	}

	engine, results, isSERP := p.engines.Match(page.GetSerpEngine(), pageURL)
	opts := extract.Options{
		MaxOutlinks:  p.cfg.MaxOutlinks,
		MaxTextBytes: p.cfg.MaxTextBytes,
		Results:      results,
		Detail:       rules.DetailSelector(),
		Resolved:     p.resolve,
	}
	// The X-Robots-Tag header carries the same directives as the meta tag.
	tag, hasTag := page.GetHeaders()["x-robots-tag"]
	headerNoIndex := false
	if hasTag {
		opts.NoFollow, headerNoIndex = extract.ParseRobotsDirectives(tag)
	}
	start := time.Now()
	ext, err := extract.Extract(pageURL, page.GetBody(), opts)
	p.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		res.outcome = OutcomeInvalidURL
		return res
	}
	for reason, n := range ext.Dropped {
		res.drop(reason, n)
	}
	ext.NoIndex = ext.NoIndex || headerNoIndex

	now := timestamppb.New(p.now())
	maxLinks := rules.MaxOutlinks()
	res.links = make([]kafka.Message, 0, min(len(ext.Links), maxLinks))
	res.linkDepth = page.GetDepth() + 1
	srcFP := page.GetUrlFp()
	if srcFP == 0 {
		srcFP = fingerprint.URL(page.GetCrawlId(), pageURL)
	}
	for i, l := range ext.Links {
		host, err := urlcanon.CanonicalKey(l.URL)
		if err != nil {
			res.drop(DropKey, 1)
			continue
		}
		if reason := rules.Check(res.host, l.URL, host, !isSERP); reason != "" {
			res.drop(reason, 1)
			continue
		}
		if res.outlinks >= maxLinks {
			res.drop(scope.DropOverCap, 1)
			continue
		}
		res.outlinks++
		fp := fingerprint.URL(page.GetCrawlId(), l.URL)
		if p.cfg.StoreLinks && p.sinks.Links != nil {
			res.linkRows = append(res.linkRows, chstore.LinkRow{CrawlID: page.GetCrawlId(), TargetHost: host, TargetURL: l.URL, TargetFP: fp,
				SourceHost: res.host, SourceURL: pageURL, SourceFP: srcFP, Position: uint16(min(i+1, 65535)),
				AnchorText: l.Anchor, Rel: l.Rel, Tag: l.Tag, Depth: uint16(min(res.linkDepth, 65535)), FoundAt: page.GetFetchedAt().AsTime()})
		}
		if p.recent.Published(fp, res.linkDepth) {
			res.drop(DropPublished, 1)
			continue
		}
		msg, err := kafkaio.NewMessage(p.topics.Discovered, []byte(host), &crawlv1.DiscoveredURL{
			CrawlId:      page.GetCrawlId(),
			Url:          l.URL,
			Depth:        res.linkDepth,
			ParentUrl:    pageURL,
			DiscoveredAt: now,
			Source:       crawlv1.Source_SOURCE_LINK,
			AnchorText:   l.Anchor,
			Rel:          l.Rel,
		})
		if err != nil {
			res.drop(DropKey, 1)
			continue
		}
		res.links = append(res.links, msg)
		res.linkFPs = append(res.linkFPs, fp)
	}
	switch {
	case isSERP:
		p.metrics.serp.WithLabelValues(engine).Inc()
		res.outcome = OutcomeSERP
		return res
	case ext.NoIndex:
		res.outcome = OutcomeNoIndex
		return res
	}
	detail := true
	if rules.HasDetailRules() {
		detail = ext.Detail || rules.DetailURL(pageURL)
	}
	if !detail {
		res.outcome = OutcomeList
		return res
	}
	res.outcome = OutcomeDocument
	res.doc = p.document(page, pageURL, res.host, ext, mt)
	return res
}

func (p *Processor) document(page *crawlv1.FetchedPage, pageURL, host string, ext extract.Result, mt string) *document {
	urlFP := page.GetUrlFp()
	if urlFP == 0 {
		urlFP = fingerprint.URL(page.GetCrawlId(), pageURL)
	}
	lang := ext.Language
	if lang == "" {
		lang = headerLanguage(page.GetHeaders()["content-language"])
	}
	contentFP := fingerprint.String(ext.Text)
	sim := simhash.Sum64(ext.Text)
	fetchedAt := page.GetFetchedAt().AsTime()
	return &document{
		row: chstore.DocumentRow{
			CrawlID:     page.GetCrawlId(),
			URL:         pageURL,
			URLFP:       urlFP,
			Host:        host,
			FetchedAt:   fetchedAt,
			Status:      uint16(page.GetStatusCode()),
			Title:       ext.Title,
			Text:        ext.Text,
			ContentFP:   contentFP,
			ContentType: mt,
			Language:    lang,
		},
		meta: chstore.DocumentMetaRow{
			CrawlID:       page.GetCrawlId(),
			URL:           pageURL,
			URLFP:         urlFP,
			Host:          host,
			FetchedAt:     fetchedAt,
			Description:   ext.Description,
			CanonicalURL:  ext.Canonical,
			Simhash:       sim,
			ContentFP:     contentFP,
			IsDetail:      true,
			TextTruncated: ext.TextTruncated,
			Depth:         uint16(min(page.GetDepth(), 65535)),
		},
		msg: &crawlv1.Document{
			CrawlId:       page.GetCrawlId(),
			Url:           pageURL,
			UrlFp:         urlFP,
			Host:          host,
			FetchedAt:     page.GetFetchedAt(),
			StatusCode:    page.GetStatusCode(),
			ContentType:   mt,
			Title:         ext.Title,
			Description:   ext.Description,
			Language:      lang,
			Text:          ext.Text,
			ContentFp:     contentFP,
			Simhash:       sim,
			Depth:         page.GetDepth(),
			CanonicalUrl:  ext.Canonical,
			TextTruncated: ext.TextTruncated,
		},
	}
}

// sitemap publishes the URLs a sitemap lists as SOURCE_SITEMAP discovered
// URLs (the entries of a sitemap index are sitemaps, parsed when fetched).
// What a damaged or over-large sitemap listed before the damage or the
// cap is published.
func (p *Processor) sitemap(page *crawlv1.FetchedPage, pageURL string, rules *scope.Rules, res *result) {
	parsed, err := sitemap.Parse(bytes.NewReader(page.GetBody()), sitemap.MaxEntries, sitemap.MaxBytes)
	if err != nil {
		if errors.Is(err, sitemap.ErrNotSitemap) {
			res.outcome = OutcomeNotHTML
			return
		}
		res.outcome = OutcomeBadSitemap
		return
	}
	for _, e := range parsed.Entries {
		if errors.Is(e.Err, sitemap.ErrNotURL) { // a text sitemap lists URLs only: this is other text
			res.outcome = OutcomeNotHTML
			return
		}
	}
	if parsed.Truncated {
		res.drop(scope.DropOverCap, 1)
	}
	resolver, err := urlcanon.NewResolver(pageURL)
	if err != nil {
		res.outcome = OutcomeInvalidURL
		return
	}
	now := timestamppb.New(p.now())
	res.outcome = OutcomeSitemap
	res.linkDepth = page.GetDepth() + 1
	seen := make(map[string]bool, len(parsed.Entries))
	for _, e := range parsed.Entries {
		switch {
		case errors.Is(e.Err, sitemap.ErrNoLoc): // lists nothing
			continue
		case errors.Is(e.Err, sitemap.ErrTooLong):
			res.drop(extract.DropTooLong, 1)
			continue
		}
		u, err := resolver.Resolve(e.Loc)
		switch {
		case errors.Is(err, urlcanon.ErrScheme):
			res.drop(extract.DropScheme, 1)
			continue
		case errors.Is(err, urlcanon.ErrTooLong):
			res.drop(extract.DropTooLong, 1)
			continue
		case err != nil:
			res.drop(extract.DropInvalid, 1)
			continue
		case seen[urlcanon.Key(u)]:
			res.drop(extract.DropDuplicate, 1)
			continue
		}
		seen[urlcanon.Key(u)] = true
		host, err := urlcanon.CanonicalKey(u)
		if err != nil {
			res.drop(DropKey, 1)
			continue
		}
		if reason := rules.Check(res.host, u, host, true); reason != "" {
			res.drop(reason, 1)
			continue
		}
		res.outlinks++
		fp := fingerprint.URL(page.GetCrawlId(), u)
		if p.recent.Published(fp, res.linkDepth) {
			res.drop(DropPublished, 1)
			continue
		}
		d := &crawlv1.DiscoveredURL{
			CrawlId:      page.GetCrawlId(),
			Url:          u,
			Depth:        res.linkDepth,
			ParentUrl:    pageURL,
			DiscoveredAt: now,
			Source:       crawlv1.Source_SOURCE_SITEMAP,
		}
		if !e.Lastmod.IsZero() {
			d.Lastmod = timestamppb.New(e.Lastmod)
		}
		msg, err := kafkaio.NewMessage(p.topics.Discovered, []byte(host), d)
		if err != nil {
			res.drop(DropKey, 1)
			continue
		}
		res.links = append(res.links, msg)
		res.linkFPs = append(res.linkFPs, fp)
	}
}

// IsHTML reports whether a Content-Type (with or without parameters) is
// an HTML media type the parser extracts.
func IsHTML(contentType string) bool { return isHTMLType(mediaType(contentType)) }

func isHTMLType(mt string) bool { return mt == "text/html" || mt == "application/xhtml+xml" }

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
