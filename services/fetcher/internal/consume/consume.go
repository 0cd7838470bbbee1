// Package consume is the fetcher's Kafka adapter: for every assigned
// partition of the fetch topic it decodes FetchRequests into the partition's
// politeness engine, dispatches eligible requests to a worker pool shared by
// all partitions, checks robots.txt, fetches, publishes the FetchedPage (and
// the target of a redirect), writes the fetch-log row, and only then acks.
package consume

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// Producer publishes records and returns once they are durable
// (kafkaio.Writer). Safe for concurrent use; blocks.
type Producer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// FetchLog stores fetch-log rows and returns once they are durable
// (chstore.BatchWriter). Safe for concurrent use; blocks.
type FetchLog interface {
	Write(ctx context.Context, rows ...chstore.FetchLogRow) error
}

// Fetcher performs one request (httpfetch.Fetcher). Safe for concurrent
// use; blocks for at most its fetch timeout.
type Fetcher interface {
	Fetch(ctx context.Context, r httpfetch.Request) *httpfetch.Response
}

// Options configures the consumer.
type Options struct {
	Topics     kafkaio.Topics
	Workers    int // concurrent requests across all partitions (default 32)
	Politeness politeness.Options
	InstanceID string           // written to fetch_log.fetcher
	Now        func() time.Time // default time.Now
}

// Service creates the partition handlers. Safe for concurrent use.
type Service struct {
	opts    Options
	fetch   Fetcher
	robots  *robots.Cache
	prod    Producer
	flog    FetchLog
	log     *zap.Logger
	m       *metrics
	workers chan struct{} // semaphore of the shared worker pool
}

// New returns a Service. reg receives the fetcher's metrics.
func New(o Options, f Fetcher, rc *robots.Cache, prod Producer, flog FetchLog, log *zap.Logger, reg prometheus.Registerer) (*Service, error) {
	if o.Workers <= 0 {
		o.Workers = 32
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	return &Service{
		opts: o, fetch: f, robots: rc, prod: prod, flog: flog, log: log, m: m,
		workers: make(chan struct{}, o.Workers),
	}, nil
}

// Assign is the kafkaio.AssignFunc: it starts the partition's dispatcher.
func (s *Service) Assign(ctx context.Context, topic string, partition int) (kafkaio.Handler, error) {
	// In-flight fetches must outlive a revoke long enough to finish within
	// Close's deadline, so they do not run under the assignment context.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &handler{
		s:         s,
		partition: partition,
		engine:    politeness.New[*task](s.opts.Now, s.opts.Politeness),
		log:       s.log.With(telemetry.Topic(topic), telemetry.Partition(partition)),
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		stopped:   make(chan struct{}),
		cancel:    cancel,
	}
	go h.dispatch(runCtx)
	return h, nil
}

// task is one FetchRequest record in a host queue.
type task struct {
	msg      kafka.Message
	ack      func(kafka.Message)
	req      *crawlv1.FetchRequest
	host     string // politeness key
	origin   string // robots.txt key
	enqueued time.Time
	waited   bool // politeness wait observed (a robots turn re-queues it)
}

// handler is the kafkaio.Handler of one partition.
type handler struct {
	s         *Service
	partition int
	engine    *politeness.Engine[*task]
	log       *zap.Logger
	wake      chan struct{} // capacity 1: something changed in the engine
	stop      chan struct{} // closed by Close: stop dispatching
	stopped   chan struct{} // closed when the dispatcher returned
	cancel    context.CancelFunc
	inflight  sync.WaitGroup

	gaugeMu        sync.Mutex
	reportedQueue  int
	reportedActive int
}

// Handle queues the batch; records are acked later, when their outcome is
// durable. Undecodable records are logged, counted and acked (poison never
// blocks the partition).
func (h *handler) Handle(ctx context.Context, batch []kafka.Message, ack func(kafka.Message)) error {
	now := h.s.opts.Now()
	for _, msg := range batch {
		req := &crawlv1.FetchRequest{}
		if err := kafkaio.Decode(msg, req); err != nil {
			h.s.m.poison.Inc()
			h.log.Warn("skipped undecodable fetch request", telemetry.Offset(msg.Offset), zap.Error(err))
			ack(msg)
			continue
		}
		t := &task{msg: msg, ack: ack, req: req, enqueued: now}
		hostKey, kerr := kafkaio.Key(req.GetUrl())
		origin, oerr := robots.Origin(req.GetUrl())
		if kerr != nil || oerr != nil {
			// The scheduler only admits canonical URLs; record and ack
			// anything else inline (rare).
			err := errors.Join(kerr, oerr)
			res := &httpfetch.Response{Start: now, Kind: failure.InvalidURL, Err: err}
			if err := h.finish(ctx, t, res); err != nil {
				return fmt.Errorf("record invalid url: %w", err)
			}
			continue
		}
		t.host, t.origin = string(hostKey), origin
		var notBefore time.Time
		if nb := req.GetNotBefore(); nb != nil {
			notBefore = nb.AsTime()
		}
		h.engine.Push(t.host, t, notBefore)
	}
	h.notify()
	return nil
}

// Close stops dispatching, waits for in-flight requests until ctx is done,
// then abandons the rest (unacked: redelivered to the next owner).
func (h *handler) Close(ctx context.Context) error {
	close(h.stop)
	<-h.stopped
	done := make(chan struct{})
	go func() {
		h.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		h.log.Warn("abandoned in-flight fetches at close, redelivered to the next owner")
		h.cancel()
		<-done
	}
	h.cancel()
	queued := h.engine.Len()
	h.s.m.abandoned.Add(float64(queued))
	h.gaugeMu.Lock()
	h.s.m.queueDepth.Sub(float64(h.reportedQueue))
	h.s.m.hostsActive.Sub(float64(h.reportedActive))
	h.reportedQueue, h.reportedActive = 0, 0
	h.gaugeMu.Unlock()
	return nil
}

func (h *handler) notify() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
	h.syncGauges()
}

// syncGauges moves the shared gauges by this partition's change.
func (h *handler) syncGauges() {
	h.gaugeMu.Lock()
	defer h.gaugeMu.Unlock()
	select {
	case <-h.stop:
		return // Close reset the partition's share
	default:
	}
	q, a := h.engine.Len(), h.engine.Hosts()
	h.s.m.queueDepth.Add(float64(q - h.reportedQueue))
	h.s.m.hostsActive.Add(float64(a - h.reportedActive))
	h.reportedQueue, h.reportedActive = q, a
}

// dispatch hands eligible requests to the shared worker pool until Close.
// Hosts waiting for their delay hold no worker.
func (h *handler) dispatch(ctx context.Context) {
	defer close(h.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// wait for an eligible host
		for {
			at, ok := h.engine.NextWakeup()
			now := h.s.opts.Now()
			if ok && !at.After(now) {
				break
			}
			var fire <-chan time.Time
			if ok {
				timer.Reset(at.Sub(now))
				fire = timer.C
			}
			select {
			case <-h.stop:
				return
			case <-h.wake:
			case <-fire:
			}
			timer.Stop()
		}
		// then for a worker
		select {
		case h.s.workers <- struct{}{}:
		case <-h.stop:
			return
		}
		now := h.s.opts.Now()
		host, t, ok := h.engine.Next(now)
		if !ok {
			<-h.s.workers
			continue
		}
		if !t.waited {
			t.waited = true
			h.s.m.politenessWait.Observe(now.Sub(t.enqueued).Seconds())
		}
		h.inflight.Add(1)
		go func() {
			defer h.inflight.Done()
			defer func() { <-h.s.workers }()
			h.process(ctx, host, t)
			h.notify()
		}()
	}
}

// process runs one turn of host: robots.txt if needed, else the page.
func (h *handler) process(ctx context.Context, host string, t *task) {
	s := h.s
	rules, fresh := s.robots.Lookup(t.origin)
	if !fresh {
		// robots.txt is a request to the host: it takes this turn, and
		// the page waits the delay after it.
		rules = s.robots.Fetch(ctx, t.origin, host)
		if ctx.Err() != nil {
			h.engine.Done(host, s.opts.Now())
			return // abandoned at close: unacked
		}
		s.m.robots.WithLabelValues(string(rules.Outcome)).Inc()
		if h.engine.SetCrawlDelay(host, rules.CrawlDelay) {
			s.m.crawlDelayCaped.Inc()
			h.log.Info("capped crawl delay", telemetry.Host(host), zap.Duration("crawl_delay", rules.CrawlDelay))
		}
		h.engine.Done(host, s.opts.Now())
		if rules.Check(s.robots.Agent(), t.req.GetUrl()) == robots.Allowed {
			h.engine.PushFront(host, t)
			return
		}
		h.refuse(ctx, t, rules)
		return
	}
	h.engine.SetCrawlDelay(host, rules.CrawlDelay)
	if rules.Check(s.robots.Agent(), t.req.GetUrl()) != robots.Allowed {
		h.engine.Release(host) // no request made: the delay clock is unchanged
		h.refuse(ctx, t, rules)
		return
	}
	res := s.fetch.Fetch(ctx, httpfetch.Request{
		URL: t.req.GetUrl(), Host: host, ETag: t.req.GetEtag(), LastModified: t.req.GetLastModified(),
	})
	end := s.opts.Now()
	h.engine.Done(host, end)
	if ctx.Err() != nil {
		return // abandoned at close: unacked
	}
	if res.Status == 429 || res.Status == 503 {
		// back off this host: Retry-After, at least a few delays
		wait := max(res.RetryAfter, 5*h.s.opts.Politeness.Delay)
		h.engine.Backoff(host, end.Add(wait))
	}
	class := statusClass(res.Status)
	s.m.fetchDuration.WithLabelValues(class).Observe(res.Duration.Seconds())
	s.m.bytes.Add(float64(res.BodyBytes))
	if err := h.finish(ctx, t, res); err != nil && ctx.Err() == nil {
		h.log.Warn("left fetch result unacked, redelivered later", telemetry.URL(t.req.GetUrl()), zap.Error(err))
	}
}

// refuse records a URL that robots.txt denies or that cannot be fetched
// now because robots.txt is unavailable.
func (h *handler) refuse(ctx context.Context, t *task, rules *robots.Rules) {
	res := &httpfetch.Response{Start: h.s.opts.Now(), Kind: failure.RobotsDenied, Err: errors.New("disallowed by robots.txt")}
	if rules.Outcome == robots.Unavailable {
		res.Kind, res.Err = rules.Kind, rules.Err
		if res.Kind == failure.None || res.Kind == failure.Redirect {
			res.Kind = failure.RobotsUnavailable
		}
		res.Status = 0
	}
	if err := h.finish(ctx, t, res); err != nil && ctx.Err() == nil {
		h.log.Warn("left fetch result unacked, redelivered later", telemetry.URL(t.req.GetUrl()), zap.Error(err))
	}
}

// finish publishes the outcome, writes the fetch-log row and acks.
func (h *handler) finish(ctx context.Context, t *task, res *httpfetch.Response) error {
	s := h.s
	req := t.req
	errMsg := ""
	if res.Err != nil {
		errMsg = truncate(res.Err.Error(), 1000)
	}
	page := &crawlv1.FetchedPage{
		CrawlId:          req.GetCrawlId(),
		Url:              req.GetUrl(),
		UrlFp:            req.GetUrlFp(),
		Depth:            req.GetDepth(),
		ParentUrl:        req.GetParentUrl(),
		FetchedAt:        timestamppb.New(res.Start),
		StatusCode:       uint32(res.Status),
		ErrorKind:        string(res.Kind),
		ErrorMessage:     errMsg,
		ContentType:      res.ContentType,
		Charset:          res.Charset,
		Headers:          res.Header,
		FetchDurationUs:  res.Duration.Microseconds(),
		TtfbUs:           res.TTFB.Microseconds(),
		Body:             res.Body,
		Truncated:        res.Truncated,
		BodyBytes:        res.BodyBytes,
		RedirectLocation: res.RedirectLocation,
		AnchorText:       req.GetAnchorText(),
		Partition:        uint32(h.partition),
	}
	key := []byte(t.host)
	if len(key) == 0 {
		key = []byte(req.GetUrl()) // invalid URL: any stable key
	}
	msg, err := kafkaio.NewMessage(s.opts.Topics.Fetched, key, page)
	if err != nil {
		return fmt.Errorf("encode fetched page: %w", err)
	}
	msgs := []kafka.Message{msg}
	if res.RedirectLocation != "" {
		if m, ok := h.redirect(t, res.RedirectLocation); ok {
			msgs = append(msgs, m)
		}
	}
	if err := s.prod.Write(ctx, msgs...); err != nil {
		return fmt.Errorf("publish fetched page: %w", err)
	}
	row := chstore.FetchLogRow{
		CrawlID:          req.GetCrawlId(),
		URL:              req.GetUrl(),
		URLFP:            req.GetUrlFp(),
		Host:             t.host,
		Partition:        uint16(h.partition),
		Attempt:          uint16(min(req.GetAttempt(), 65535)),
		FetchedAt:        res.Start,
		FetchedAtMs:      uint16(res.Start.Nanosecond() / int(time.Millisecond)),
		Status:           uint16(res.Status),
		ErrorKind:        string(res.Kind),
		ErrorMessage:     errMsg,
		Bytes:            uint64(max(res.BodyBytes, 0)),
		ContentType:      res.ContentType,
		DurationMs:       uint32(res.Duration.Milliseconds()),
		RedirectLocation: res.RedirectLocation,
		Depth:            uint16(min(req.GetDepth(), 65535)),
		Fetcher:          s.opts.InstanceID,
	}
	if err := s.flog.Write(ctx, row); err != nil {
		return fmt.Errorf("write fetch log: %w", err)
	}
	s.m.fetches.WithLabelValues(statusClass(res.Status), string(res.Kind)).Inc()
	t.ack(t.msg)
	return nil
}

// redirect builds the DiscoveredURL of a redirect target: it goes back
// through the scheduler's dedup to whichever partition owns its host.
func (h *handler) redirect(t *task, target string) (kafka.Message, bool) {
	key, err := kafkaio.Key(target)
	if err != nil {
		h.log.Debug("skipped unfollowable redirect", telemetry.URL(t.req.GetUrl()), zap.Error(err))
		return kafka.Message{}, false
	}
	d := &crawlv1.DiscoveredURL{
		CrawlId:      t.req.GetCrawlId(),
		Url:          target,
		Depth:        t.req.GetDepth(),
		ParentUrl:    t.req.GetUrl(),
		DiscoveredAt: timestamppb.New(h.s.opts.Now()),
		Source:       crawlv1.Source_SOURCE_REDIRECT,
		AnchorText:   t.req.GetAnchorText(),
	}
	msg, err := kafkaio.NewMessage(h.s.opts.Topics.Discovered, key, d)
	if err != nil {
		h.log.Warn("skipped redirect target", telemetry.URL(target), zap.Error(err))
		return kafka.Message{}, false
	}
	return msg, true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
