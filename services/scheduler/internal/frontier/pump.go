package frontier

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
)

// Store holds the admitted URLs deferred by the host quota or a pause
// (table frontier_v2; sinks.Frontier). Safe for concurrent use.
type Store interface {
	// Write inserts rows (pending or released), blocking until they are
	// durable or returning an error.
	Write(ctx context.Context, rows ...rows.FrontierRow) error
	// Pending returns up to perHost still-pending rows of every host of
	// the partition, each host's best first (highest priority, then
	// shallowest: priority.Rank), leaving out the crawls in skip.
	Pending(ctx context.Context, partition, perHost int, skip []string) ([]rows.FrontierRow, error)
}

// Producer writes records durably (acks=all; *kafkaio.Writer). Safe for
// concurrent use; blocks.
type Producer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// EventWriter inserts url_events rows (*chstore.BatchWriter). Safe for
// concurrent use; blocks until they are durable.
type EventWriter interface {
	Write(ctx context.Context, rows ...rows.URLEventRow) error
}

// PendingRow is the pending frontier row of an admitted fetch request of
// host, deferred at now.
func PendingRow(partition int, host string, fr *crawlv1.FetchRequest, now time.Time) rows.FrontierRow {
	r := rows.FrontierRow{
		Partition:  uint16(partition),
		CrawlID:    fr.GetCrawlId(),
		Host:       host,
		FP:         fr.GetUrlFp(),
		Depth:      uint16(min(fr.GetDepth(), 65535)),
		URL:        fr.GetUrl(),
		ParentURL:  fr.GetParentUrl(),
		AnchorText: fr.GetAnchorText(),
		SerpEngine: fr.GetSerpEngine(),
		State:      rows.FrontierPending,
		UpdatedAt:  now,
		// A URL of the previous crawl: still asked for conditionally.
		ETag: fr.GetEtag(), LastModified: fr.GetLastModified(), DocumentCrawlID: fr.GetDocumentCrawlId(),
		// Released with it: the fetcher's host queue orders by it.
		Priority: fr.GetPriority(), PriorityReason: fr.GetPriorityReason(),
	}
	if fr.GetDiscoveredAt() != nil {
		r.DiscoveredAt = fr.GetDiscoveredAt().AsTime()
	}
	return r
}

// PumpConfig configures the pumps of a scheduler.
type PumpConfig struct {
	Topic string // the fetch topic
	// PerHost is the host quota of a window (0: unlimited, and a read
	// takes at most UnlimitedPerHost pending URLs per host).
	PerHost int
	Window  time.Duration // the pump's interval
	// Paused, optional, lists the crawls whose rows stay pending.
	Paused func() []string
	// Changed, optional, returns a channel closed at the next change of
	// the crawl specifications: the pump then runs at once.
	Changed func() <-chan struct{}
	// State, optional, is a crawl's operator state (RUNNING without it).
	State func(crawlID string) crawlv1.CrawlState
	// Key returns the record key of a canonical URL.
	Key func(canonical string) ([]byte, error)
	Now func() time.Time
	// Released counts the fetch requests released; Cancelled the pending
	// URLs of cancelled crawls dropped.
	Released, Cancelled prometheus.Counter
}

// UnlimitedPerHost bounds one pump read per host when there is no quota.
const UnlimitedPerHost = 1000

// Pump releases a partition's deferred URLs as their hosts' quota allows:
// every window it reads up to one quota of pending URLs per host
// (best first: highest priority, then shallowest), produces the fetch requests that fit, then records
// them released. A crash between the two re-releases them (fetched twice,
// at most one window's quota per host). Errors are logged and retried at
// the next tick; the partition keeps running.
//
// A pump whose last read found nothing pending stays idle (no query)
// until the partition defers a URL (MarkDeferred) or a crawl specification
// changes (a resumed crawl's URLs become releasable): a crawl without
// quota or pause costs no frontier query every window per partition.
type Pump struct {
	cfg       PumpConfig
	partition int
	quota     *Quota
	store     Store
	prod      Producer
	events    EventWriter
	log       *zap.Logger
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	deferred  atomic.Int64 // URLs the partition deferred, counted once durable
	since     uint64       // the quota's Generation at the previous read (run's goroutine)
}

// StartPump starts the pump of partition, sharing quota with the
// partition's handler. Stop ends it.
func StartPump(cfg PumpConfig, partition int, quota *Quota, store Store, prod Producer, events EventWriter, log *zap.Logger) *Pump {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pump{cfg: cfg, partition: partition, quota: quota, store: store, prod: prod, events: events, log: log, cancel: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.run(ctx)
	}()
	return p
}

// MarkDeferred tells the pump that n more URLs wait in the frontier.
// Safe for concurrent use.
func (p *Pump) MarkDeferred(n int) { p.deferred.Add(int64(n)) }

// Stop ends the pump and waits for it.
func (p *Pump) Stop() {
	p.cancel()
	p.wg.Wait()
}

func (p *Pump) run(ctx context.Context) {
	t := time.NewTicker(p.cfg.Window)
	defer t.Stop()
	idle := false // the first read finds what a previous owner left
	var seen int64
	// changed is the channel of the specifications as they were before
	// the next read, and is replaced only once it fired: a change is
	// never lost behind a tick that came with it (select picks either
	// at random) or between a tick and the next pass.
	changed := p.changes()
	for {
		if d := p.deferred.Load(); !idle || d != seen {
			seen = d
			n, err := p.releaseOnce(ctx)
			if err != nil && ctx.Err() == nil {
				p.log.Warn("release frontier failed, retrying next window", zap.Error(err))
			}
			idle = err == nil && n == 0
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
			idle = false
			changed = p.changes()
		}
	}
}

// changes is the channel closed at the next change of the crawl
// specifications (nil, never ready, without PumpConfig.Changed).
func (p *Pump) changes() <-chan struct{} {
	if p.cfg.Changed == nil {
		return nil
	}
	return p.cfg.Changed()
}

// releaseOnce releases what the quota allows and returns how many pending
// URLs it read.
func (p *Pump) releaseOnce(ctx context.Context) (int, error) {
	perHost := p.cfg.PerHost
	if perHost <= 0 {
		perHost = UnlimitedPerHost
	}
	var skip []string
	if p.cfg.Paused != nil {
		skip = p.cfg.Paused()
	}
	since := p.since
	p.since = p.quota.Generation()
	pending, err := p.store.Pending(ctx, p.partition, perHost, skip)
	if err != nil {
		return 0, err
	}
	// What the read leaves pending per host, for the quota's backlogs:
	// the rank of the first row the quota refused, or, when a host's every
	// row was released but the read was cut at perHost, its last row's.
	left := make(map[string]uint32)
	read := make(map[string]int)
	settle := func() {
		for host, n := range read {
			if _, ok := left[host]; !ok && n >= perHost {
				left[host] = lastRank(pending, host)
			}
		}
		p.quota.Settle(left, since)
	}
	var (
		msgs     []kafka.Message
		released []rows.FrontierRow
		events   []rows.URLEventRow
	)
	now := p.cfg.Now()
	for _, r := range pending {
		switch p.crawlState(r.CrawlID) {
		case crawlv1.CrawlState_CRAWL_STATE_PAUSED:
			continue // paused after the query started
		case crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
			r.State, r.UpdatedAt = rows.FrontierCancelled, now
			released = append(released, r)
			events = append(events, rows.URLEventRow{
				CrawlID: r.CrawlID, URL: r.URL, URLFP: r.FP, Host: r.Host, Partition: r.Partition,
				State: admit.StateCancelled, Reason: string(admit.Cancelled), Depth: r.Depth, EventTime: now,
				Priority: r.Priority, PriorityReason: r.PriorityReason,
			})
			continue
		}
		read[r.Host]++
		if _, refused := left[r.Host]; refused || !p.quota.Take(r.Host) {
			if !refused {
				left[r.Host] = rank(r)
			}
			continue
		}
		key, err := p.cfg.Key(r.URL)
		if err != nil {
			return len(pending), fmt.Errorf("key frontier url: %w", err)
		}
		fr := &crawlv1.FetchRequest{
			CrawlId:         r.CrawlID,
			Url:             r.URL,
			UrlFp:           r.FP,
			Depth:           uint32(r.Depth),
			ParentUrl:       r.ParentURL,
			AnchorText:      r.AnchorText,
			SerpEngine:      r.SerpEngine,
			DiscoveredAt:    timestamppb.New(r.DiscoveredAt),
			ScheduledAt:     timestamppb.New(now),
			Etag:            r.ETag,
			LastModified:    r.LastModified,
			DocumentCrawlId: r.DocumentCrawlID,
			Priority:        r.Priority,
			PriorityReason:  r.PriorityReason,
		}
		m, err := kafkaio.NewMessage(p.cfg.Topic, key, fr)
		if err != nil {
			return len(pending), fmt.Errorf("encode fetch request: %w", err)
		}
		msgs = append(msgs, m)
		r.State, r.UpdatedAt = rows.FrontierReleased, now
		released = append(released, r)
	}
	if len(released) == 0 {
		settle()
		return len(pending), nil
	}
	if len(msgs) > 0 {
		// Not cut short by a revoke: requests sent by a write that
		// returned the revoke's error would be released again by the
		// next owner, their rows still pending.
		if err := kafkaio.WriteGraced(ctx, p.prod, msgs...); err != nil {
			return len(pending), fmt.Errorf("produce released fetch requests: %w", err)
		}
	}
	// The cancelled URLs' terminal rows go in before their frontier rows
	// stop being pending: a crash in between only writes them again.
	if len(events) > 0 {
		if err := p.events.Write(ctx, events...); err != nil {
			return len(pending), fmt.Errorf("record cancelled urls: %w", err)
		}
	}
	if err := p.store.Write(ctx, released...); err != nil {
		return len(pending), fmt.Errorf("record released urls: %w", err)
	}
	p.cfg.Released.Add(float64(len(msgs)))
	p.cfg.Cancelled.Add(float64(len(events)))
	settle()
	return len(pending), nil
}

// lastRank is the rank of host's last row in rows.
func lastRank(rs []rows.FrontierRow, host string) uint32 {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Host == host {
			return rank(rs[i])
		}
	}
	return 0
}

// rank is a frontier row's place in its host's order (priority.Rank:
// highest priority, then shallowest, first).
func rank(r rows.FrontierRow) uint32 { return priority.Rank(r.Priority, uint32(r.Depth)) }

// crawlState is a crawl's operator state (RUNNING without PumpConfig.State).
func (p *Pump) crawlState(crawlID string) crawlv1.CrawlState {
	if p.cfg.State == nil {
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING
	}
	return p.cfg.State(crawlID)
}
