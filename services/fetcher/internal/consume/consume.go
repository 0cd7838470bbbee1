// Package consume is the fetcher's Kafka adapter. For every assigned
// partition of the fetch topic it decodes FetchRequests into the tasks of
// a partition.Partition (its host queues, claims and budget state) and
// starts a dispatch.Dispatcher over its host queues and a worker pool
// shared by all partitions; a host's turn (turn.go) checks
// robots.txt, fetches and feeds the answer back to the engine; the
// attempt's outcome (outcome.Of) is encoded (package emit), handed to the
// recorder, which produces it and writes the fetch-log row, and only then
// is the record acked (record.go).
//
// Every decision about a request is package decide's (Intake and Place
// when a record is read, Turn and what follows at a host's turn) and every
// record produced is encoded by package emit (topics, keys, headers): this
// package gathers the decisions' inputs, carries out their answers,
// produces, counts and acks.
//
// Files: consume.go (options, the Service, assignment, the handler,
// Close), intake.go (Handle: a batch becomes tasks, each decided and
// placed by the partition, queued or deferred; a task's request, acks),
// turn.go (a host's turn, the sitemaps of its robots.txt and the page
// budget's part in it; its requests run under the group lease,
// kafkaio.LeaseGuard), record.go (outcomes recorded and acked, the
// metrics and logs of their encoding; cancelled, spent and paused
// requests), hoststates.go (state handed to the next owner), robotstxt.go
// (stored robots.txt: restored at assignment, rows recorded with an
// outcome), serp.go, metrics.go (the fetch path's; httpfetch and
// robots.Cache count their own requests). Records are encoded by package emit,
// redelivered attempts looked up by package redelivery, pages rendered by
// package render, and a crawl's settings resolved by libs/crawlsettings.
package consume

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/decide"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/dispatch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/emit"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/recorder"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/redelivery"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/render"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// Producer publishes records and returns once they are durable
// (kafkaio.Writer). Safe for concurrent use; blocks.
type Producer interface {
	Write(ctx context.Context, msgs ...kafka.Message) error
}

// Recorder makes fetch outcomes durable and reports each one done
// (*recorder.Recorder). Record returns as soon as the outcome is queued;
// safe for concurrent use.
type Recorder interface {
	Record(ctx context.Context, o recorder.Outcome)
}

// Fetcher performs one request (httpfetch.Fetcher). Safe for concurrent
// use; Fetch blocks for at most its fetch timeout. Release closes the
// connection kept for a host the partition holds no request of.
type Fetcher interface {
	Fetch(ctx context.Context, r httpfetch.Request) *httpfetch.Response
	Release(host string)
}

// DefaultDeferPause is Options.DeferPause's default.
const DefaultDeferPause = time.Second

// Options configures the consumer.
type Options struct {
	Topics     kafkaio.Topics
	Workers    int // concurrent requests across all partitions (default 32)
	Politeness politeness.Options
	Now        func() time.Time // default time.Now
	// Outcome: the retries and redirects of what a fetch leaves behind,
	// and the instance written to fetch_log.fetcher (its zero fields at
	// their defaults: outcome.Options.WithDefaults).
	Outcome outcome.Options
	// Limits bound a partition's host queues and what it holds in memory
	// (decide.Limits.WithDefaults).
	Limits decide.Limits
	// DeferPause is how long Handle waits after a batch it deferred
	// entirely, so that a partition of far-future work does not spin
	// through the topic (default 1s).
	DeferPause time.Duration
	// HostStates loads the persisted politeness state of a partition's
	// hosts at assignment; with it set, a host's state is also published
	// to Topics.HostState after a request that changed it in a way the
	// next owner could not infer (a Crawl-delay, a back-off, a long
	// Retry-After: politeness.Engine.Changed), and at close.
	// Nil: no persistence, a host's first request waits one delay.
	HostStates HostStateLoader
	// Crawls is the followed control topic (crawlcontrol.Specs); nil:
	// every crawl runs with the defaults. Before every fetch the request's
	// crawl state is checked: a cancelled crawl's request is recorded as
	// failure.Cancelled without a request, a paused one is deferred
	// durably by Limits.PauseRecheck; a crawl's politeness raises (never lowers)
	// the delays of Politeness.
	Crawls Crawls
	// Servers, when set, groups hosts by the server they resolve to
	// (politeness.ServerKey of their first address, from Resolve): one
	// request at a time reaches a server, across every host and every
	// partition of this fetcher, and the next starts no earlier than the
	// gate's gap after it. A host that does not resolve is its own
	// server. Nil: hosts are independent.
	Servers *politeness.Gate
	// Resolve returns the address a host (a politeness key, host[:port])
	// is fetched from (httpfetch.Fetcher.Resolve); required with Servers.
	Resolve func(ctx context.Context, host string) (netip.Addr, error)
	// Recorded and Published, optional, tell which redelivered records a
	// previous owner fetched already (a fetch-log row, a FetchedPage):
	// those are acked without a request (redelivery.Options).
	Recorded  redelivery.Recorded
	Published redelivery.Published
	// Attempts is the process-wide memory of held and finished attempts
	// (default: partition.NewAttempts(partition.DefaultAttemptsLimit)); shared by every
	// partition, so it survives a partition going and coming back.
	Attempts *partition.Attempts
	// Budget, optional, charges the pages of crawls with a page budget
	// (*budget.Tracker): the first attempt of a URL (not a retry, not a
	// revisit) is charged when its host's turn requests it or robots.txt
	// refuses it; once the crawl's budget is spent its remaining first
	// attempts are recorded as failure.BudgetExhausted without a request.
	// Nil: no budget.
	Budget Budget
	// RobotsTxt, optional, stores robots.txt beyond the process: every
	// robots.txt fetched with a valid answer is recorded with the outcome
	// of the request whose turn fetched it (so it is durable before that
	// request is acked), and at assignment the robots cache is filled with
	// the partition's unexpired entries, so a restarted or newly assigned
	// fetcher does not ask those sites again. Needs a Recorder that writes
	// robots.txt rows. Nil: the cache lives in memory only.
	RobotsTxt RobotsStore
	// Archive, optional, keeps the raw exchange of every fetch that got
	// an answer (package warc): the fetch is made with
	// httpfetch.Request.Capture and archived before its outcome is
	// recorded, and its fetch_log row carries the file and offset of the
	// record. Nil: nothing is archived.
	Archive Archiver
	// Renderer, optional, loads pages in a headless browser
	// (*browser.Browser): a page fetched with a 200 that its crawl's
	// render mode (else Render) says needs it is rendered within its
	// host's turn (render.Renderer), and the DOM the page's scripts built
	// becomes its body (FetchedPage.rendered). An Archive that keeps
	// renderings (render.Archiver) archives what the browser fetched.
	// Nil: no page is rendered.
	Renderer render.Loader
	Render   rendersniff.Mode
	// Flush, when set, asks the writers an outcome's durability waits on
	// to write as soon as they hold rows rows of partition, and returns
	// at once (chstore.BatchWriter.FlushWhenKey of the fetch log's). It
	// is called when FlushAt requests of one partition are with the
	// recorder: a partition whose window (--max-inflight-per-partition)
	// fills faster than the fetch log's interval (a few busy hosts, no
	// delay) would otherwise stop reading until the interval, and its
	// rate would be the window per interval whatever the CPU. A partition
	// that fills its window with requests waiting for their hosts' turns
	// (many hosts, each polite) never gets there, and its rows keep their
	// interval. Zero FlushAt: never.
	Flush   func(partition, rows int)
	FlushAt int
}

// Archiver archives a fetch (*warc.Writer). Archive blocks until the
// records are written and returns where the main record is; it is safe
// for concurrent use.
type Archiver interface {
	Archive(ctx context.Context, req *crawlv1.FetchRequest, res *httpfetch.Response) (file string, offset int64, err error)
}

// Crawls reports crawl specifications (crawlcontrol.Specs).
type Crawls interface {
	State(crawlID string) crawlv1.CrawlState
	Get(crawlID string) *crawlv1.CrawlSpec
}

// Budget charges the pages of crawls with a page budget (*budget.Tracker).
// Safe for concurrent use; Reserve may block once per crawl on a count.
type Budget interface {
	// Reserve charges one page to the crawl and reports whether one was
	// left (an error says the count behind it could not be read; ok is
	// still meaningful).
	Reserve(ctx context.Context, crawlID string) (bool, error)
	// Exhausted reports whether the crawl has no page left (an error: as
	// far as the count could be read).
	Exhausted(ctx context.Context, crawlID string) (bool, error)
	// Unreserve gives back a page charged for a request not made.
	Unreserve(crawlID string)
	// Remaining returns the pages the crawl has left as far as known,
	// negative without a budget.
	Remaining(crawlID string) int64
}

// HostStateLoader reads the persisted host states of a partition
// (hoststate.Loader).
type HostStateLoader interface {
	Load(ctx context.Context, partition int) (map[string]politeness.HostState, error)
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = 32
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Outcome = o.Outcome.WithDefaults()
	o.Limits = o.Limits.WithDefaults()
	o.Politeness.FullAt = o.Limits.MaxHostQueue
	if o.DeferPause <= 0 {
		o.DeferPause = DefaultDeferPause
	}
	if o.Attempts == nil {
		o.Attempts = partition.NewAttempts(partition.DefaultAttemptsLimit)
	}
	return o
}

// Service creates the partition handlers. Safe for concurrent use.
type Service struct {
	opts    Options
	fetch   Fetcher
	robots  *robots.Cache
	prod    Producer // deferrals, held requests, sitemaps, host states at close
	rec     Recorder // fetch outcomes
	log     *zap.Logger
	m       *metrics
	workers *dispatch.Pool // shared by every partition
	// serpLogged: the (crawl, host) pairs whose robots.txt exception for
	// result pages was logged (serp.go).
	serpLogged telemetry.Once
	// spentLogged: the crawls (host "") whose spent page budget was logged.
	spentLogged telemetry.Once
	// crawls: the settings of crawls, resolved once per revision.
	crawls   *crawlsettings.Cache
	renderer *render.Renderer // pages that need a browser (Options.Renderer)

	enc *emit.Encoder // the records produced

	partsMu sync.Mutex
	parts   map[*handler]struct{} // the live partitions, read by the gauges
}

// New returns a Service. rec must outlive the group that runs the
// Service's handlers: a handler's Close waits for its outcomes. reg
// receives the fetcher's metrics.
func New(o Options, f Fetcher, rc *robots.Cache, prod Producer, rec Recorder, log *zap.Logger, reg prometheus.Registerer) (*Service, error) {
	o = o.withDefaults()
	if o.Servers != nil && o.Resolve == nil {
		return nil, errors.New("consume: Options.Servers needs Options.Resolve")
	}
	refused := func(crawl string, err error) {
		// A user agent or a header the seeder would refuse (a
		// specification published by something else) is not sent.
		log.Warn("crawl identity partly refused, sent without it", telemetry.Crawl(crawl), zap.Error(err))
	}
	s := &Service{
		opts: o, fetch: f, robots: rc, prod: prod, rec: rec, log: log,
		crawls:  crawlsettings.NewCache(crawlsettings.Fleet{Render: o.Render.Spec()}, refused),
		workers: dispatch.NewPool(o.Workers),
		enc:     emit.New(emit.Options{Topics: o.Topics, Now: o.Now, Outcome: o.Outcome}),
		parts:   make(map[*handler]struct{}),
	}
	var err error
	if s.m, err = newMetrics(reg, s.sum((*politeness.Engine[*partition.Task]).Len), s.sum((*politeness.Engine[*partition.Task]).Hosts)); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	archive, _ := o.Archive.(render.Archiver)
	if s.renderer, err = render.New(o.Renderer, archive, log, reg); err != nil {
		return nil, err
	}
	return s, nil
}

// sum returns the sum of of over the engines of the live partitions (the
// gauges' reading).
func (s *Service) sum(of func(*politeness.Engine[*partition.Task]) int) func() float64 {
	return func() float64 {
		s.partsMu.Lock()
		defer s.partsMu.Unlock()
		n := 0
		for h := range s.parts {
			n += of(h.p.Engine())
		}
		return float64(n)
	}
}

// Pause stops new requests, in every partition, until Resume; the
// requests in flight finish (backpressure.Gate).
func (s *Service) Pause() { s.workers.Pause() }

// Resume lets new requests start again.
func (s *Service) Resume() { s.workers.Resume() }

// Assign is the kafkaio.AssignFunc: it starts the partition's dispatcher.
func (s *Service) Assign(ctx context.Context, topic string, part int) (kafkaio.Handler, error) {
	// In-flight fetches must outlive a revoke long enough to finish within
	// Close's deadline, so they do not run under the assignment context.
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &handler{
		s:         s,
		topic:     topic,
		partition: part,
		p: partition.New(partition.Options{
			Politeness: s.opts.Politeness, Limits: s.opts.Limits, Attempts: s.opts.Attempts, Now: s.opts.Now,
		}),
		log:    s.log.With(telemetry.Topic(topic), telemetry.Partition(part)),
		cancel: cancel,
	}
	if s.opts.HostStates != nil {
		// The previous owner's state replaces the one-delay wait. Without
		// it (load failed) the one-delay wait still keeps the host safe.
		states, err := s.opts.HostStates.Load(ctx, part)
		if err != nil {
			h.log.Warn("started without host states, first requests wait one delay", zap.Error(err))
		}
		for host, st := range states {
			h.p.Engine().Restore(host, st)
		}
		s.m.hostStatesLoaded.Add(float64(len(states)))
	}
	if s.opts.RobotsTxt != nil {
		s.restoreRobots(ctx, part, h.log)
	}
	h.lease = kafkaio.NewLeaseGuard(h.log, s.m.leaseLapses)
	h.redelivered = redelivery.New(redelivery.Options{
		Partition: part, Recorded: s.opts.Recorded, Published: s.opts.Published, Errors: s.m.recordedErrors, Log: h.log,
	})
	h.lease.Watch(runCtx, kafkaio.LeaseOf(ctx))
	h.disp = dispatch.Start(runCtx, h.p.Engine(), s.workers, s.opts.Now, h.turn)
	s.partsMu.Lock()
	s.parts[h] = struct{}{}
	s.partsMu.Unlock()
	return h, nil
}

// handler is the kafkaio.Handler of one partition.
type handler struct {
	s         *Service
	topic     string
	partition int
	acker     func(kafka.Message)                   // the group's ack (Handle's argument, the same for every batch)
	releaser  func(kafka.Message)                   // the group's release (SetRelease), or nil
	strs      partition.Strings                     // crawl ids and schema names of queued tasks
	p         *partition.Partition                  // the partition's host queues, claims and budget state
	disp      *dispatch.Dispatcher[*partition.Task] // its turns are fetches (turn)
	log       *zap.Logger
	cancel    context.CancelFunc
	lease     *kafkaio.LeaseGuard // the requests' context under the group lease
	recording sync.WaitGroup      // outcomes handed to the recorder, not yet durable
	writing   atomic.Int64        // the requests of those outcomes (handOver)

	redelivered *redelivery.Lookup // what a previous owner handled; Handle's goroutine only
}

// SetRelease is kafkaio.Releaser's: the group calls it once, before the
// first batch, when it keeps a settling allowance beside the window
// (kafkaio.GroupConfig.MaxSettling). A request whose outcome is handed to
// the recorder is then released: it waits for its fetch-log insert
// outside the window, and the window's room goes to requests to fetch.
func (h *handler) SetRelease(release func(kafka.Message)) { h.releaser = release }

// Close stops dispatching, waits for in-flight requests and their outcomes
// until ctx is done, then abandons the rest (unacked: redelivered to the
// next owner).
func (h *handler) Close(ctx context.Context) error {
	h.disp.Stop()
	done := make(chan struct{})
	go func() { // ends when the recorder has settled every outcome
		h.disp.Wait()
		h.recording.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// Requests still being fetched stop at once; outcomes already
		// with the recorder are written and acked, or not, on their own
		// (a late ack only spares the next owner a fetch-log look-up).
		h.log.Warn("abandoned in-flight fetches at close, redelivered to the next owner")
		h.cancel()
		h.disp.Wait()
	}
	h.cancel()
	h.lease.Wait()
	h.publishStates()
	// Not requested, or cut short: the next owner fetches them (those
	// with the recorder settle on their own: partition.Partition.Handed).
	h.p.Abandon()
	h.s.m.abandoned.Add(float64(h.p.Engine().Len()))
	h.s.partsMu.Lock()
	delete(h.s.parts, h)
	h.s.partsMu.Unlock()
	return nil
}

// settings are crawl's effective settings: its specification's (none
// without Crawls, or none known), else the fetcher's.
func (s *Service) settings(crawl string) crawlsettings.Settings {
	var spec *crawlv1.CrawlSpec
	if s.opts.Crawls != nil {
		spec = s.opts.Crawls.Get(crawl)
	}
	return s.crawls.Of(crawl, spec)
}

// crawlState is the state of a crawl (running without Crawls).
func (s *Service) crawlState(crawl string) crawlv1.CrawlState {
	if s.opts.Crawls == nil {
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING
	}
	return s.opts.Crawls.State(crawl)
}
