// Package browser loads pages in headless Chromium, for the pages whose
// text and links are built by scripts (issue 36), as a fetcher with
// manners: a Browser is one Chromium process with a bounded pool of tabs,
// and a page load (Load) fetches only what the page needs from the page's
// own host, asks robots.txt (Options.Allow) for the page and for every
// request, blocks images, media, fonts and other hosts, caps its requests
// and its time, and ends in a recorded Outcome, never a stuck loader.
//
// What a load does, in order:
//
//  1. Options.Allow is asked for the page; refused, nothing is loaded
//     (OutcomeRobots).
//  2. A tab is taken from the pool (at most Options.Tabs loads at once; a
//     load waits for a free tab). Chromium is started first if it is not
//     running: at the first load, after it died, after
//     Options.RestartAfter pages, or once its processes hold more than
//     Options.MaxRSS.
//  3. The tab navigates to the page. Every request is paused (the Fetch
//     domain) and decided: an image, media or font is blocked; a request
//     to another host than the page's is blocked unless
//     Options.AllowOtherHosts; Allow is asked, and a refused request is
//     blocked; past Options.MaxRequests, requests are blocked. The main
//     frame going to another page (a script setting location, a redirect
//     to another host) is blocked and the load ends as
//     OutcomeNavigatedAway. Each request let through is paused again at
//     its response: a download (Content-Disposition: attachment) is
//     refused, and the response is kept as an Exchange (its body up to
//     Options.MaxBody). Dialogs are dismissed and counted.
//  4. The page settles when its load event has fired and no request has
//     been in flight for Options.SettleIdle (OutcomeSettled), or it runs
//     out of Options.PageTimeout (OutcomeTimeout). The DOM is then read
//     as it stands. A script that never yields (while(true){}) keeps even
//     that from answering: the script is terminated (Runtime.
//     terminateExecution), the DOM read again, and the tab closed; if the
//     DOM still cannot be read, the outcome is OutcomeHung.
//  5. The tab goes back to about:blank (which ends what the page still
//     does and cancels its paused requests) and to the pool. A tab that
//     crashed, had its script terminated or failed to reset is closed and
//     replaced by a new one at its next use; a crash of the tab or of the
//     browser makes Load return an error, and the next Load starts a new
//     Chromium if needed.
//
// The user agent and the extra headers of the crawl are the browser's
// (Emulation.setUserAgentOverride, Network.setExtraHTTPHeaders), for the
// page and every request it makes: the Options', or a load's own (LoadAs).
//
// Not covered: requests of workers and service workers (service workers
// are bypassed, a dedicated worker's fetches are not paused), WebSocket
// connections (not HTTP requests: Fetch does not see them), and requests
// Chromium makes on its own (background networking is turned off).
package browser

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"sync"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// Options configure a Browser. The zero value of a field takes the
// default given in its comment.
type Options struct {
	// Exec is the Chromium binary; default: the first of chromium,
	// chromium-browser, google-chrome, headless-shell on the PATH.
	Exec string
	// Tabs is the number of pages loaded at once; default 1.
	Tabs int
	// UserAgent and Headers are the crawl's, sent with the page and every
	// request it makes; empty, Chromium's own user agent.
	UserAgent string
	Headers   map[string]string
	// PageTimeout bounds a page load, from navigation to settling;
	// default 30 s.
	PageTimeout time.Duration
	// SettleIdle is how long the network must be idle after the load
	// event for the page to be settled; default 500 ms.
	SettleIdle time.Duration
	// ReadTimeout bounds reading the DOM after the page settled or ran out
	// of time, and resetting the tab; default 5 s.
	ReadTimeout time.Duration
	// MaxRequests caps the requests of a page load let through, the
	// page's own included; default 100.
	MaxRequests int
	// MaxBody caps the body kept in an Exchange; default 1 MiB. A response
	// whose Content-Length is larger is not read (Truncated).
	MaxBody int
	// AllowOtherHosts lets the page request other hosts than its own (a
	// CDN's scripts); they are still asked of Allow.
	AllowOtherHosts bool
	// Allow decides the page and every request of it (robots.txt); nil
	// allows everything. It is called from the load's goroutines, must be
	// safe for concurrent use, and should answer from memory: the request
	// waits for it.
	Allow func(url string) bool
	// RestartAfter restarts Chromium after this many page loads, to bound
	// what it leaks; 0, never.
	RestartAfter int
	// MaxRSS restarts Chromium once its processes' summed RSS passes this
	// many bytes (checked after each load); 0, no limit.
	MaxRSS int64
	// Lazy starts Chromium at the first load rather than in New: a
	// fetcher that renders only for the crawls that ask pays nothing
	// until one does.
	Lazy bool
}

// withDefaults returns o with its zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.Tabs == 0 {
		o.Tabs = 1
	}
	if o.PageTimeout == 0 {
		o.PageTimeout = 30 * time.Second
	}
	if o.SettleIdle == 0 {
		o.SettleIdle = 500 * time.Millisecond
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 5 * time.Second
	}
	if o.MaxRequests == 0 {
		o.MaxRequests = 100
	}
	if o.MaxBody == 0 {
		o.MaxBody = 1 << 20
	}
	return o
}

// Validate reports the first option out of range.
func (o Options) Validate() error {
	switch {
	case o.Tabs < 0:
		return fmt.Errorf("tabs %d: below 0", o.Tabs)
	case o.PageTimeout < 0, o.SettleIdle < 0, o.ReadTimeout < 0:
		return errors.New("a negative duration")
	case o.MaxRequests < 0, o.MaxBody < 0, o.RestartAfter < 0, o.MaxRSS < 0:
		return errors.New("a negative limit")
	case o.SettleIdle >= o.PageTimeout && o.PageTimeout > 0:
		return fmt.Errorf("settle idle %v: not below the page timeout %v", o.SettleIdle, o.PageTimeout)
	}
	return nil
}

// Errors of Load. Both are transient: the page was not loaded, and a
// later Load runs in a new tab (and, after ErrBrowserGone, a new
// Chromium).
var (
	// ErrTabCrashed: the tab's renderer crashed during the load.
	ErrTabCrashed = errors.New("tab crashed")
	// ErrBrowserGone: Chromium exited or its connection broke during the
	// load (or it could not be started).
	ErrBrowserGone = errors.New("browser gone")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("browser closed")
)

// Browser is one Chromium process (started again when it dies or is due
// for a restart) with a pool of Options.Tabs tabs. Its methods are safe for
// concurrent use. Close stops it.
type Browser struct {
	opts Options
	// base is the context Chromium runs under: New's. chromedp keeps a
	// browser's life in the context of its first run, so the Browser
	// holds it for the restarts.
	base context.Context //nolint:containedctx // chromedp binds Chromium's life to a context; restarts need New's

	// slots holds the pool's tabs: Options.Tabs entries, nil for a slot
	// whose tab is not open (yet, or any more). A load takes one.
	slots chan *tab

	// mu guards proc and closed. life is held for reading by every load
	// for its whole length, and for writing to replace proc: a restart
	// waits for the loads in flight (each bounded by its time limits).
	mu     sync.Mutex
	life   sync.RWMutex
	proc   *process
	closed bool

	statsMu sync.Mutex
	stats   Stats
}

// Stats are a Browser's counters since New, for the fetcher's metrics.
type Stats struct {
	Starts     int // Chromium processes started (the first included)
	Restarts   map[string]int
	Loads      int
	Outcomes   map[Outcome]int
	Errors     int // loads that returned an error
	Requests   int // requests let through
	Blocked    map[string]int
	Dialogs    int
	TabsOpened int
	TabsClosed int // closed and to be replaced: crashed, hung, failed to reset
}

// The reasons of a restart, the keys of Stats.Restarts.
const (
	RestartDied  = "died"  // Chromium exited or lost its connection
	RestartPages = "pages" // Options.RestartAfter pages
	RestartRSS   = "rss"   // Options.MaxRSS passed
)

// New starts Chromium with opts. It runs until Close or until ctx ends.
func New(ctx context.Context, opts Options) (*Browser, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("browser options: %w", err)
	}
	opts = opts.withDefaults()
	if opts.Exec == "" {
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
			if p, err := exec.LookPath(name); err == nil {
				opts.Exec = p
				break
			}
		}
		if opts.Exec == "" {
			return nil, errors.New("start browser: no chromium on the PATH")
		}
	}
	b := &Browser{
		opts:  opts,
		base:  ctx,
		slots: make(chan *tab, opts.Tabs),
		stats: Stats{Restarts: map[string]int{}, Outcomes: map[Outcome]int{}, Blocked: map[string]int{}},
	}
	for range opts.Tabs {
		b.slots <- nil
	}
	if opts.Lazy {
		return b, nil // acquire starts it
	}
	p, err := b.start(ctx)
	if err != nil {
		return nil, err
	}
	b.proc = p
	return b, nil
}

// Close stops Chromium and removes its user data directory. Loads in
// flight end first (each within its time limits); later Loads return
// ErrClosed.
func (b *Browser) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	b.life.Lock()
	defer b.life.Unlock()
	b.mu.Lock()
	p := b.proc
	b.proc = nil
	b.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.stop()
}

// Stats returns a copy of the counters.
func (b *Browser) Stats() Stats {
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	s := b.stats
	s.Restarts = maps.Clone(s.Restarts)
	s.Outcomes = maps.Clone(s.Outcomes)
	s.Blocked = maps.Clone(s.Blocked)
	return s
}

// Usage reads what the running Chromium's processes use; an error when
// none runs.
func (b *Browser) Usage() (Usage, error) {
	b.mu.Lock()
	p := b.proc
	b.mu.Unlock()
	if p == nil {
		return Usage{}, ErrBrowserGone
	}
	return treeUsage(p.pid)
}

// PID is the process id of the running Chromium, 0 when none runs.
func (b *Browser) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.proc == nil {
		return 0
	}
	return b.proc.pid
}

func (b *Browser) count(f func(s *Stats)) {
	b.statsMu.Lock()
	f(&b.stats)
	b.statsMu.Unlock()
}

// process is one Chromium process: the chromedp contexts of its allocator
// and of its first tab (cancelling them stops it).
type process struct {
	ctx     context.Context //nolint:containedctx // the browser's chromedp context: a tab is opened from it, and it ends when Chromium dies
	cancel  context.CancelFunc
	acancel context.CancelFunc
	pid     int
	pages   int // loads begun on it; guarded by Browser.mu
}

// dead tells whether Chromium exited or lost its connection.
func (p *process) dead() bool { return p.ctx.Err() != nil }

// stop closes Chromium, gracefully if it answers within 10 s, and waits
// until its user data directory is removed.
func (p *process) stop() error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
	defer cancel()
	var err error
	if !p.dead() {
		if cerr := chromedp.Cancel(ctx); cerr != nil && !errors.Is(cerr, context.Canceled) {
			err = fmt.Errorf("close browser: %w", cerr)
		}
	}
	p.cancel()
	p.acancel() // waits for the process and removes its user data directory
	return err
}

// start starts a Chromium process. ctx bounds the start only; the process
// runs under b.base.
func (b *Browser) start(ctx context.Context) (*process, error) {
	flags := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(b.opts.Exec),
		chromedp.NoSandbox, // we may run as root, in a container: see the README
		// A page must not open windows: their requests would not be
		// paused (and would escape robots.txt and the caps).
		chromedp.Flag("block-new-web-contents", true),
		chromedp.Flag("disable-popup-blocking", false),
		// Images are never fetched; Fetch blocks the rest by type.
		chromedp.Flag("blink-settings", "imagesEnabled=false"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("no-pings", true),
		// The back/forward cache keeps a page's renderer alive after the
		// tab moves on (to about:blank, between loads): one process per
		// page loaded, never freed. Local Network Access (Chromium 141+)
		// takes a page the fetcher fulfils for a public one and blocks its
		// requests to a private address (10/8, 192.168/16: a crawl with
		// --allow-private of an intranet, the multi-host lab): the
		// crawl's scope and robots.txt decide what a page may ask, not
		// the browser's idea of address spaces.
		chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,OptimizationHints,MediaRouter,Prerender2,BackForwardCache,LocalNetworkAccessChecks"),
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1280, 1024),
	)

	actx, acancel := chromedp.NewExecAllocator(b.base, flags...)
	bctx, bcancel := chromedp.NewContext(actx)
	// The first run starts Chromium and binds its life to bctx: a start
	// that takes too long, or a ctx that ends, cancels bctx instead.
	stopStart := context.AfterFunc(ctx, bcancel)
	timer := time.AfterFunc(30*time.Second, bcancel)
	err := chromedp.Do(bctx)
	timer.Stop()
	stopStart()
	if err == nil {
		_, err = chromedp.CallBrowser(bctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorDeny})
	}
	if err != nil {
		bcancel()
		acancel()
		return nil, fmt.Errorf("start browser: %w: %w", ErrBrowserGone, err)
	}
	b.count(func(s *Stats) { s.Starts++ })
	return &process{ctx: bctx, cancel: bcancel, acancel: acancel, pid: chromedp.FromContext(bctx).Browser.Process().Pid}, nil
}

// acquire returns the process a load runs on, started or restarted as
// needed, with b.life held for reading: release it with b.life.RUnlock.
func (b *Browser) acquire(ctx context.Context) (*process, error) {
	for {
		b.life.RLock()
		b.mu.Lock()
		p, closed := b.proc, b.closed
		why := b.restartReason(p)
		if why == "" && !closed {
			p.pages++
			b.mu.Unlock()
			return p, nil
		}
		b.mu.Unlock()
		b.life.RUnlock()
		if closed {
			return nil, ErrClosed
		}
		if err := b.restart(ctx, why); err != nil {
			return nil, err
		}
	}
}

// restartReason says why p must be replaced before a load, or "".
// b.mu is held.
func (b *Browser) restartReason(p *process) string {
	switch {
	case p == nil, p.dead():
		return RestartDied
	case b.opts.RestartAfter > 0 && p.pages >= b.opts.RestartAfter:
		return RestartPages
	}
	return ""
}

// restart replaces the process, once the loads in flight ended, if it
// still must be replaced for why (another load may have done it).
func (b *Browser) restart(ctx context.Context, why string) error {
	b.life.Lock()
	defer b.life.Unlock()
	b.mu.Lock()
	old, closed := b.proc, b.closed
	now := b.restartReason(old)
	if why == RestartRSS && now == "" && old != nil {
		now = why
	}
	b.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if now == "" {
		return nil
	}
	if old != nil {
		_ = old.stop() // replaced whatever its close says
		b.count(func(s *Stats) { s.Restarts[now]++ })
	}
	p, err := b.start(ctx)
	b.mu.Lock()
	b.proc = p // nil on failure: the next load tries again
	b.mu.Unlock()
	return err
}

// Load loads url in a tab of the pool and returns what the page showed
// once it settled or ran out of time (see the package documentation). It
// returns an error only when the page could not be loaded at all: ctx
// ended, the tab or the browser crashed (ErrTabCrashed, ErrBrowserGone),
// the Browser is closed (ErrClosed), or url is not http(s).
func (b *Browser) Load(ctx context.Context, rawURL string) (*Page, error) {
	return b.LoadAs(ctx, rawURL, As{})
}

// Document is a page as a fetcher received it (As.Document).
type Document struct {
	Status int
	// Header is the response's header. Content-Encoding, Content-Length,
	// Transfer-Encoding and Connection are dropped: Body is the body as
	// the browser must read it (decoded, in the charset Header's
	// Content-Type says).
	Header http.Header
	Body   []byte
}

// As is whose page a load is, where one Browser serves several crawls:
// each field left zero is the Browser's Options'.
type As struct {
	// Document is the page as the fetcher fetched it: the browser reads
	// it for the page itself, without asking the server again, and
	// requests only what the page's scripts and styles need (a crawler
	// asks a site for a page once). A redirect or a navigation the page
	// makes goes to the network, decided as any request. Nil: the page
	// is requested.
	Document *Document
	// Allow is the crawl's robots.txt, asked for the page and every
	// request (Options.Allow).
	Allow func(url string) bool
	// UserAgent and Headers are the crawl's identity (Options.UserAgent,
	// Options.Headers): a tab takes them for the load when they differ
	// from its last load's.
	UserAgent string
	Headers   map[string]string
	// OtherHosts lets this load's requests to other hosts than the page's
	// through, as Options.AllowOtherHosts does for every load (a crawl's
	// render.other_hosts).
	OtherHosts bool
}

// LoadAs is Load as as says.
func (b *Browser) LoadAs(ctx context.Context, rawURL string, as As) (*Page, error) {
	page, err := b.load(ctx, rawURL, b.resolve(as))
	b.count(func(s *Stats) {
		s.Loads++
		if err != nil {
			s.Errors++
			return
		}
		s.Outcomes[page.Outcome]++
		s.Requests += page.Requests
		s.Dialogs += page.Dialogs
		for k, n := range page.Blocked {
			s.Blocked[k] += n
		}
	})
	return page, err
}

// resolve fills as's zero fields from the Browser's options.
func (b *Browser) resolve(as As) As {
	if as.Allow == nil {
		as.Allow = b.opts.Allow
	}
	if as.UserAgent == "" {
		as.UserAgent = b.opts.UserAgent
	}
	if as.Headers == nil {
		as.Headers = b.opts.Headers
	}
	return as
}

func (b *Browser) load(ctx context.Context, rawURL string, as As) (*Page, error) {
	target, err := pageURL(rawURL)
	if err != nil {
		return nil, err
	}
	if as.Allow != nil && !as.Allow(rawURL) {
		return &Page{URL: rawURL, Outcome: OutcomeRobots, Blocked: map[string]int{BlockedRobots: 1}}, nil
	}
	var t *tab
	select {
	case t = <-b.slots:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { b.slots <- t }()

	p, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	page, err := b.loadIn(ctx, p, &t, target, rawURL, as)
	b.life.RUnlock()
	if b.opts.MaxRSS > 0 && err == nil {
		if u, uerr := treeUsage(p.pid); uerr == nil && u.RSS > b.opts.MaxRSS {
			if rerr := b.restart(ctx, RestartRSS); rerr != nil {
				return page, nil //nolint:nilerr // the page is loaded; the next load starts Chromium again
			}
		}
	}
	return page, err
}

// loadIn loads the page in *t on p, opening a tab if *t is nil or belongs
// to an older process, and closing it (*t = nil) when it must not be
// used again.
func (b *Browser) loadIn(ctx context.Context, p *process, t **tab, target *pageTarget, rawURL string, as As) (*Page, error) {
	if *t != nil && (*t).proc != p {
		(*t).close()
		*t = nil
	}
	if *t == nil {
		nt, err := b.openTab(ctx, p)
		if err != nil {
			if p.dead() {
				return nil, fmt.Errorf("open tab: %w: %w", ErrBrowserGone, err)
			}
			return nil, fmt.Errorf("open tab: %w", err)
		}
		*t = nt
		b.count(func(s *Stats) { s.TabsOpened++ })
	}
	page, keep, err := (*t).load(ctx, &b.opts, target, rawURL, as)
	if !keep {
		(*t).close()
		*t = nil
		b.count(func(s *Stats) { s.TabsClosed++ })
	}
	if err != nil && p.dead() {
		return nil, fmt.Errorf("load %s: %w: %w", rawURL, ErrBrowserGone, err)
	}
	return page, err
}
