package pages

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// handler handles one partition: Handle parses and publishes a batch, the
// batch's rows are stored in the background (stores) and its records
// acked when they are in.
type handler struct {
	p      *Processor
	log    *zap.Logger
	stores *kafkaio.Later
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
	began := time.Now()
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
		res := p.process(ctx, page)
		if res.outcome == OutcomeInvalidURL {
			h.log.Warn("page with invalid url skipped", telemetry.URL(page.GetUrl()), telemetry.Offset(offsets[i]))
		}
		results = append(results, res)
	}
	if err := ctx.Err(); err != nil {
		// A document's reading was cut short by the end of the handler
		// (readDocument): nothing of the batch is recorded nor acked.
		return fmt.Errorf("parse batch: %w", err)
	}
	// Parsed: the pages (whose bodies point into the records) are not
	// read again, and the lookups and the publish below wait on I/O, with
	// every partition of this parser doing the same.
	clear(pages)
	kafkaio.DropPayloads(batch)
	parsed := time.Now()
	p.metrics.batchSteps.WithLabelValues(StepParse).Observe(parsed.Sub(began).Seconds())
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
	looked := time.Now()
	p.metrics.batchSteps.WithLabelValues(StepLookup).Observe(looked.Sub(parsed).Seconds())
	p.markNearDuplicates(results, near)

	var (
		msgs    []kafka.Message
		docs    []chstore.DocumentRow
		metas   []chstore.DocumentMetaRow
		firsts  []chstore.ContentSeenRow
		bands   []chstore.SimhashBandRow
		nears   []chstore.NearDuplicateRow
		links   []chstore.LinkRow
		carried []chstore.CarriedRow
		outlink int
		// republished: links published before, again with in_links
		republished int
	)
	dropped := make(map[chstore.LinksDroppedRow]uint64)
	hour := p.now().UTC().Truncate(time.Hour)
	batchLinks := make(map[uint64]uint32) // published by this batch: fingerprint -> depth
	for _, r := range results {
		p.metrics.pages.WithLabelValues(r.outcome).Inc()
		links = append(links, r.linkRows...)
		if r.carried != nil {
			carried = append(carried, *r.carried)
		}
		for i, m := range r.links {
			if i >= len(r.links)-r.suspects {
				msgs = append(msgs, m)
				outlink++
				continue
			}
			fp := r.linkFPs[i]
			if d, ok := batchLinks[fp]; ok && d <= r.linkDepth {
				r.drop(DropPublished, 1)
				continue
			}
			batchLinks[fp] = r.linkDepth
			msgs = append(msgs, m)
			outlink++
		}
		msgs = append(msgs, r.inLinks...)
		republished += len(r.inLinks)
		for reason, n := range r.dropped {
			p.metrics.dropped.WithLabelValues(reason).Add(float64(n))
			dropped[chstore.LinksDroppedRow{CrawlID: r.crawlID, Host: r.host, Reason: reason, Hour: hour}] += uint64(n)
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
		sent := time.Now()
		if err := p.sinks.Publisher.Write(ctx, msgs...); err != nil {
			return fmt.Errorf("publish %d outlinks and documents: %w", len(msgs), err)
		}
		p.metrics.batchSteps.WithLabelValues(StepPublish).Observe(time.Since(sent).Seconds())
		p.metrics.links.Add(float64(outlink))
		p.metrics.inLinks.Add(float64(republished))
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
	storing := time.Now()
	h.stores.Go(func(ctx context.Context) error {
		if err := p.store(ctx, stored{docs, metas, firsts, rows, bands, nears, links, carried}); err != nil {
			return err
		}
		p.metrics.batchSteps.WithLabelValues(StepStore).Observe(time.Since(storing).Seconds())
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
	carried []chstore.CarriedRow
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
	g.Go(func() error { return write(ctx, p.sinks.Carried, s.carried, "carried-over documents") })
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
