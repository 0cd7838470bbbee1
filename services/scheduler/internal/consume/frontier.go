package consume

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/admit"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/frontier"
)

// Frontier stores the admitted URLs deferred by the host quota. Safe for
// concurrent use.
type Frontier interface {
	// Write inserts rows (pending or released), blocking until they are
	// durable or returning an error.
	Write(ctx context.Context, rows ...chstore.FrontierRow) error
	// Pending returns up to perHost still-pending rows of every host of
	// the partition, shallowest first, leaving out the crawls in skip.
	Pending(ctx context.Context, partition, perHost int, skip []string) ([]chstore.FrontierRow, error)
}

// StoreFrontier is the ClickHouse frontier: rows go through a batching
// writer, Pending queries the table.
type StoreFrontier struct {
	W     *chstore.BatchWriter[chstore.FrontierRow]
	Store *chstore.Store
}

// Write implements Frontier.
func (f StoreFrontier) Write(ctx context.Context, rows ...chstore.FrontierRow) error {
	return f.W.Write(ctx, rows...)
}

// Pending implements Frontier. A URL is pending while its key has no
// released row; the per-host limit keeps the answer bounded however large
// the frontier is.
func (f StoreFrontier) Pending(ctx context.Context, partition, perHost int, skip []string) ([]chstore.FrontierRow, error) {
	args := []any{uint16(partition)}
	skipSQL := ""
	if len(skip) > 0 {
		skipSQL = " AND crawl_id NOT IN (" + strings.TrimSuffix(strings.Repeat("?,", len(skip)), ",") + ")"
		for _, id := range skip {
			args = append(args, id)
		}
	}
	args = append(args, uint64(perHost))
	rows, err := f.Store.Conn().Query(ctx, `SELECT crawl_id, host, fp, d, u, p, a, e, t FROM (
	SELECT crawl_id, host, fp, any(depth) AS d, any(url) AS u, any(parent_url) AS p,
		any(anchor_text) AS a, any(serp_engine) AS e, any(discovered_at) AS t
	FROM frontier_v2
	WHERE partition = ?`+skipSQL+`
	GROUP BY crawl_id, host, fp
	HAVING max(state) = 0
) ORDER BY host, d, fp LIMIT ? BY host`, args...)
	if err != nil {
		return nil, fmt.Errorf("query frontier: %w", err)
	}
	defer rows.Close()
	var out []chstore.FrontierRow
	for rows.Next() {
		r := chstore.FrontierRow{Partition: uint16(partition)}
		if err := rows.Scan(&r.CrawlID, &r.Host, &r.FP, &r.Depth, &r.URL, &r.ParentURL, &r.AnchorText, &r.SerpEngine, &r.DiscoveredAt); err != nil {
			return nil, fmt.Errorf("scan frontier: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read frontier: %w", err)
	}
	return out, nil
}

// deferredRow is the pending frontier row of an admitted fetch request.
func deferredRow(partition int, host string, fr *crawlv1.FetchRequest, now time.Time) chstore.FrontierRow {
	r := chstore.FrontierRow{
		Partition:  uint16(partition),
		CrawlID:    fr.GetCrawlId(),
		Host:       host,
		FP:         fr.GetUrlFp(),
		Depth:      uint16(min(fr.GetDepth(), 65535)),
		URL:        fr.GetUrl(),
		ParentURL:  fr.GetParentUrl(),
		AnchorText: fr.GetAnchorText(),
		SerpEngine: fr.GetSerpEngine(),
		State:      chstore.FrontierPending,
		UpdatedAt:  now,
	}
	if fr.GetDiscoveredAt() != nil {
		r.DiscoveredAt = fr.GetDiscoveredAt().AsTime()
	}
	return r
}

// pump releases a partition's deferred URLs as their hosts' quota allows:
// every window it reads up to one quota of pending URLs per host
// (shallowest first), produces the fetch requests that fit, then records
// them released. A crash between the two re-releases them (fetched twice,
// at most one window's quota per host). Errors are logged and retried at
// the next tick; the partition keeps running.
//
// A pump whose last read found nothing pending stays idle (no query)
// until the partition defers a URL (deferred) or a crawl specification
// changes (a resumed crawl's URLs become releasable): a crawl without
// quota or pause costs no frontier query every window per partition.
type pump struct {
	s         *Scheduler
	partition int
	quota     *frontier.Quota
	log       *zap.Logger
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	deferred  atomic.Int64 // URLs the partition deferred, counted once durable
}

// markDeferred tells the pump that n more URLs wait in the frontier.
func (p *pump) markDeferred(n int) { p.deferred.Add(int64(n)) }

func (s *Scheduler) startPump(partition int, quota *frontier.Quota, log *zap.Logger) *pump {
	ctx, cancel := context.WithCancel(context.Background())
	p := &pump{s: s, partition: partition, quota: quota, log: log, cancel: cancel}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.run(ctx)
	}()
	return p
}

// stop ends the pump and waits for it.
func (p *pump) stop() {
	p.cancel()
	p.wg.Wait()
}

func (p *pump) run(ctx context.Context) {
	t := time.NewTicker(p.s.cfg.QuotaWindow)
	defer t.Stop()
	idle := false // the first read finds what a previous owner left
	var seen int64
	for {
		var changed <-chan struct{} // nil: never
		if p.s.cfg.Changed != nil {
			changed = p.s.cfg.Changed()
		}
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
		}
	}
}

// unlimitedPerHost bounds one pump read per host when there is no quota.
const unlimitedPerHost = 1000

// releaseOnce releases what the quota allows and returns how many pending
// URLs it read.
func (p *pump) releaseOnce(ctx context.Context) (int, error) {
	s := p.s
	perHost := s.cfg.HostQuota
	if perHost <= 0 {
		perHost = unlimitedPerHost
	}
	var skip []string
	if s.cfg.Paused != nil {
		skip = s.cfg.Paused()
	}
	pending, err := s.frontier.Pending(ctx, p.partition, perHost, skip)
	if err != nil {
		return 0, err
	}
	var (
		msgs     []kafka.Message
		released []chstore.FrontierRow
		events   []chstore.URLEventRow
	)
	now := s.now()
	for _, r := range pending {
		switch s.crawlState(r.CrawlID) {
		case crawlv1.CrawlState_CRAWL_STATE_PAUSED:
			continue // paused after the query started
		case crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
			r.State, r.UpdatedAt = chstore.FrontierCancelled, now
			released = append(released, r)
			events = append(events, chstore.URLEventRow{
				CrawlID: r.CrawlID, URL: r.URL, URLFP: r.FP, Host: r.Host, Partition: r.Partition,
				State: admit.StateCancelled, Reason: string(admit.Cancelled), Depth: r.Depth, EventTime: now,
			})
			continue
		}
		if !p.quota.Take(r.Host) {
			continue
		}
		key, _, err := s.partitionOf(r.URL)
		if err != nil {
			return len(pending), fmt.Errorf("key frontier url: %w", err)
		}
		fr := &crawlv1.FetchRequest{
			CrawlId:      r.CrawlID,
			Url:          r.URL,
			UrlFp:        r.FP,
			Depth:        uint32(r.Depth),
			ParentUrl:    r.ParentURL,
			AnchorText:   r.AnchorText,
			SerpEngine:   r.SerpEngine,
			DiscoveredAt: timestamppb.New(r.DiscoveredAt),
			ScheduledAt:  timestamppb.New(now),
		}
		m, err := kafkaio.NewMessage(s.cfg.Topics.Fetch, key, fr)
		if err != nil {
			return len(pending), fmt.Errorf("encode fetch request: %w", err)
		}
		msgs = append(msgs, m)
		r.State, r.UpdatedAt = chstore.FrontierReleased, now
		released = append(released, r)
	}
	if len(released) == 0 {
		return len(pending), nil
	}
	if len(msgs) > 0 {
		if err := s.producer.Write(ctx, msgs...); err != nil {
			return len(pending), fmt.Errorf("produce released fetch requests: %w", err)
		}
	}
	// The cancelled URLs' terminal rows go in before their frontier rows
	// stop being pending: a crash in between only writes them again.
	if len(events) > 0 {
		if err := s.events.Write(ctx, events...); err != nil {
			return len(pending), fmt.Errorf("record cancelled urls: %w", err)
		}
	}
	if err := s.frontier.Write(ctx, released...); err != nil {
		return len(pending), fmt.Errorf("record released urls: %w", err)
	}
	s.metrics.released.Add(float64(len(msgs)))
	s.metrics.dropped.WithLabelValues(string(admit.Cancelled)).Add(float64(len(events)))
	return len(pending), nil
}

// crawlState is a crawl's operator state (RUNNING without Config.State).
func (s *Scheduler) crawlState(crawlID string) crawlv1.CrawlState {
	if s.cfg.State == nil {
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING
	}
	return s.cfg.State(crawlID)
}
