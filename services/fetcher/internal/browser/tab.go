package browser

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/css"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/inspector"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// pageTarget is a page's URL and the host its requests are held to.
type pageTarget struct {
	url  *url.URL
	host string // lower-case host[:port], as Chromium spells it
}

func pageURL(raw string) (*pageTarget, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("load %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("load %q: not an http(s) URL", raw)
	}
	return &pageTarget{url: u, host: hostOf(u)}, nil
}

// hostOf is u's host and port, lower-case, without the scheme's default
// port (Chromium drops it from the URLs it reports).
func hostOf(u *url.URL) string {
	h := strings.ToLower(u.Host)
	switch {
	case u.Scheme == "http" && strings.HasSuffix(h, ":80"):
		h = strings.TrimSuffix(h, ":80")
	case u.Scheme == "https" && strings.HasSuffix(h, ":443"):
		h = strings.TrimSuffix(h, ":443")
	}
	return h
}

// tab is one open tab of a process, with Fetch interception on.
type tab struct {
	ctx    context.Context //nolint:containedctx // the tab's chromedp context: cancelling it closes the tab
	cancel context.CancelFunc
	proc   *process
	frame  cdp.FrameID // the main frame (its id is the target's)
	// ua and headers are the identity the tab sends (identify).
	ua      string
	headers string // headerKey of the extra headers
}

// openTab opens a tab on p and sets it up for page loads: service workers
// bypassed, every request paused (each load sets its crawl's identity:
// identify).
func (b *Browser) openTab(ctx context.Context, p *process) (*tab, error) {
	tctx, cancel := chromedp.NewContext(p.ctx)
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	timer := time.AfterFunc(b.opts.ReadTimeout*2, cancel)
	err := chromedp.Do(tctx) // creates the target and attaches to it
	timer.Stop()
	if err != nil {
		cancel()
		return nil, err
	}
	t := &tab{ctx: tctx, cancel: cancel, proc: p, frame: cdp.FrameID(chromedp.FromContext(tctx).Target.TargetID)}
	sctx, scancel := context.WithTimeout(tctx, b.opts.ReadTimeout)
	defer scancel()
	if err := t.setup(sctx); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *tab) setup(ctx context.Context) error {
	// chromedp enables the DOM, CSS and Log domains on every tab: each
	// then reports every change of the page to us, which costs the
	// renderer and the browser CPU for events nobody reads.
	for _, disable := range []func(context.Context) error{
		func(ctx context.Context) error { _, err := chromedp.Call(ctx, dom.Disable, cdp.Empty{}); return err },
		func(ctx context.Context) error { _, err := chromedp.Call(ctx, css.Disable, cdp.Empty{}); return err },
		func(ctx context.Context) error { _, err := chromedp.Call(ctx, log.Disable, cdp.Empty{}); return err },
	} {
		if err := disable(ctx); err != nil {
			return fmt.Errorf("disable domains: %w", err)
		}
	}
	if _, err := chromedp.Call(ctx, network.SetBypassServiceWorker, network.SetBypassServiceWorkerParams{Bypass: true}); err != nil {
		return fmt.Errorf("bypass service workers: %w", err)
	}
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{
		Patterns: []*fetch.RequestPattern{{URLPattern: "*", RequestStage: fetch.RequestStageRequest}},
	}); err != nil {
		return fmt.Errorf("enable fetch: %w", err)
	}
	return nil
}

// identify makes the tab send as's user agent and headers, when they
// differ from its last load's (Emulation.setUserAgentOverride,
// Network.setExtraHTTPHeaders, which an empty set clears).
func (t *tab) identify(ctx context.Context, as As) error {
	if as.UserAgent != "" && as.UserAgent != t.ua {
		if _, err := chromedp.Call(ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: as.UserAgent}); err != nil {
			return fmt.Errorf("set user agent: %w", err)
		}
		t.ua = as.UserAgent
	}
	if key := headerKey(as.Headers); key != t.headers {
		h := network.Headers{}
		for k, v := range as.Headers {
			h[k] = v
		}
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h}); err != nil {
			return fmt.Errorf("set headers: %w", err)
		}
		t.headers = key
	}
	return nil
}

// headerKey is a set of headers as one comparable string.
func headerKey(h map[string]string) string {
	keys := make([]string, 0, len(h))
	for k, v := range h {
		keys = append(keys, k+"\x00"+v)
	}
	sort.Strings(keys)
	return strings.Join(keys, "\x01")
}

// close closes the tab (its renderer goes with it).
func (t *tab) close() { t.cancel() }

// load loads one page in the tab. keep says whether the tab may be used
// again (it was reset to about:blank).
func (t *tab) load(ctx context.Context, o *Options, target *pageTarget, rawURL string, as As) (_ *Page, keep bool, _ error) {
	start := time.Now()
	ictx, icancel := context.WithTimeout(t.ctx, o.ReadTimeout)
	err := t.identify(ictx, as)
	icancel()
	if err != nil {
		return nil, false, err
	}
	l := &load{
		doc:        as.Document,
		allow:      as.Allow,
		otherHosts: as.OtherHosts || o.AllowOtherHosts,
		opts:       o,
		target:     target,
		frame:      t.frame,
		inflight:   map[network.RequestID]struct{}{},
		docIDs:     map[fetch.RequestID]bool{},
		blocked:    map[string]int{},
		changed:    make(chan struct{}, 1),
	}

	// The handlers run until the tab is reset: a request the page makes
	// while it is read is still decided.
	hctx, hcancel := context.WithCancel(t.ctx)
	var handlers sync.WaitGroup
	defer func() {
		hcancel()
		handlers.Wait()
		l.responses.Wait()
	}()
	if err := chromedp.Listen(hctx, l.listen); err != nil {
		return nil, false, err
	}
	paused := chromedp.Events(hctx, fetch.RequestPaused)
	dialogs := chromedp.Events(hctx, page.JavascriptDialogOpening)
	handlers.Go(func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			l.paused(hctx, ev)
		}
	})
	handlers.Go(func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			l.mu.Lock()
			l.dialogs++
			l.mu.Unlock()
			// An error: the dialog went with its page.
			_, _ = chromedp.Call(hctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	})

	lctx, lcancel := context.WithTimeout(t.ctx, o.PageTimeout)
	defer lcancel()
	stop := context.AfterFunc(ctx, lcancel)
	defer stop()
	detached, err := chromedp.Detached(t.ctx)
	if err != nil {
		return nil, false, err
	}

	outcome, navErr := l.navigate(lctx, rawURL)
	// The DOM is the page's only when the navigation went through: a
	// failed or refused one may show Chromium's error page.
	read := outcome == "" || outcome == OutcomeTimeout
	if outcome == "" {
		outcome = l.settle(lctx, detached)
	}
	switch {
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case t.proc.dead():
		return nil, false, ErrBrowserGone
	case outcome == outcomeCrashed && t.browserGone():
		return nil, false, ErrBrowserGone
	case outcome == outcomeCrashed && navErr != "":
		return nil, false, fmt.Errorf("navigate: %w: %s", ErrTabCrashed, navErr)
	case outcome == outcomeCrashed:
		return nil, false, ErrTabCrashed
	}

	p := &Page{URL: rawURL, Error: navErr}
	keep = true
	if read && l.committed() {
		snap, terminated, err := t.read(o)
		switch {
		case t.proc.dead(), err != nil && t.browserGone():
			return nil, false, ErrBrowserGone
		case l.isCrashed():
			return nil, false, ErrTabCrashed
		case err != nil:
			outcome, keep = OutcomeHung, false
		default:
			p.HTML, p.Title, p.FinalURL = snap.html, snap.title, snap.url
			keep = !terminated
		}
	}
	if keep {
		keep = t.reset(l, o)
	}
	hcancel()
	handlers.Wait()
	l.responses.Wait()

	l.mu.Lock()
	defer l.mu.Unlock()
	p.Outcome = outcome
	if outcome == OutcomeSettled || outcome == OutcomeTimeout {
		if l.navigatedAway {
			p.Outcome = OutcomeNavigatedAway
		}
	}
	p.Status = l.status
	p.Requests = l.requests
	p.Blocked = l.blocked
	p.Dialogs = l.dialogs
	p.Exchanges = l.exchanges
	p.Duration = time.Since(start)
	return p, keep, nil
}

// snapshot is the DOM read at the end of a load.
type snapshot struct{ html, title, url string }

// readDOM serializes the document: its doctype, its root element's outer
// HTML, its title and URL.
const readDOM = `(() => {
	const d = document, t = d.doctype;
	const doctype = t ? "<!DOCTYPE " + t.name + (t.publicId ? ' PUBLIC "' + t.publicId + '"' : "") + (t.systemId ? ' "' + t.systemId + '"' : "") + ">\n" : "";
	return [doctype + (d.documentElement ? d.documentElement.outerHTML : ""), d.title, d.URL];
})()`

// read reads the DOM within o.ReadTimeout. A page whose script does not
// yield cannot answer: its script is terminated and the DOM read once
// more (terminated says so: the tab is not to be trusted again).
func (t *tab) read(o *Options) (_ snapshot, terminated bool, _ error) {
	try := func() (snapshot, error) {
		ctx, cancel := context.WithTimeout(t.ctx, o.ReadTimeout)
		defer cancel()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](readDOM))
		if err != nil {
			return snapshot{}, err
		}
		if len(v) != 3 {
			return snapshot{}, fmt.Errorf("read DOM: %d values", len(v))
		}
		return snapshot{html: v[0], title: v[1], url: v[2]}, nil
	}
	s, err := try()
	if err == nil || t.ctx.Err() != nil {
		return s, false, err
	}
	ctx, cancel := context.WithTimeout(t.ctx, o.ReadTimeout)
	defer cancel()
	if _, terr := chromedp.Call(ctx, runtime.TerminateExecution, cdp.Empty{}); terr != nil {
		return snapshot{}, true, errors.Join(err, terr)
	}
	s, err = try()
	return s, true, err
}

// reset takes the tab back to about:blank, ending whatever the page
// still does (its paused requests are cancelled with it), and reports
// whether that worked.
func (t *tab) reset(l *load, o *Options) bool {
	l.mu.Lock()
	l.closing = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(t.ctx, o.ReadTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, page.Navigate, page.NavigateParams{URL: "about:blank"})
	return err == nil && res.ErrorText == ""
}

// outcomeCrashed is the answer of navigate and settle when the tab
// crashed or went away: Load returns ErrTabCrashed, or ErrBrowserGone
// when Chromium went with it.
const outcomeCrashed Outcome = "crashed"

// browserGone reports whether Chromium is gone, waiting a moment for
// chromedp to notice: a tab's commands fail as soon as the connection
// breaks, the browser's context ends a little later.
func (t *tab) browserGone() bool {
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	select {
	case <-t.proc.ctx.Done():
		return true
	case <-timer.C:
		return false
	}
}

// load is the state of one page load, shared by the tab's event
// listener, the handler of paused requests, the goroutines reading
// responses, and Load.
type load struct {
	doc   *Document             // the page as fetched (As.Document), nil: requested
	allow func(url string) bool // the load's robots.txt (As.Allow), nil: everything
	// otherHosts lets requests to other hosts through (As.OtherHosts,
	// Options.AllowOtherHosts).
	otherHosts bool
	opts       *Options
	target     *pageTarget
	frame      cdp.FrameID

	responses sync.WaitGroup // the goroutines of paused responses

	mu            sync.Mutex
	inflight      map[network.RequestID]struct{}
	lastActivity  time.Time
	loaded        bool // the load event of the page fired
	navigated     bool // the main frame committed the page
	served        bool // the page's own request was answered with doc
	crashed       bool
	closing       bool // the load is over: fail whatever the page still asks
	docIDs        map[fetch.RequestID]bool
	navigatedAway bool
	download      bool
	status        int
	requests      int
	blocked       map[string]int
	dialogs       int
	exchanges     []Exchange
	changed       chan struct{} // a signal to settle, never blocks
}

// listen sees the tab's events in order, in the tab's reading loop: it
// only notes them.
func (l *load) listen(ev any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		l.inflight[ev.RequestID] = struct{}{}
	case *network.EventLoadingFinished:
		delete(l.inflight, ev.RequestID)
	case *network.EventLoadingFailed:
		delete(l.inflight, ev.RequestID)
	case *page.EventFrameNavigated:
		if ev.Frame.ParentID == "" && ev.Frame.URL != "about:blank" && !strings.HasPrefix(ev.Frame.URL, "chrome-error:") {
			// A load event from before (about:blank's) does not count.
			l.navigated, l.loaded = true, false
		}
	case *page.EventLoadEventFired:
		l.loaded = l.navigated
	case *inspector.EventTargetCrashed:
		l.crashed = true
	default:
		return
	}
	l.lastActivity = time.Now()
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *load) committed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.navigated
}

func (l *load) isCrashed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.crashed
}

// navigate starts the page and returns an outcome when the load already
// ended there (the page failed, went elsewhere, is a download, or the
// time ran out), with the navigation's error text.
func (l *load) navigate(ctx context.Context, rawURL string) (Outcome, string) {
	res, err := chromedp.Call(ctx, page.Navigate, page.NavigateParams{URL: rawURL})
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.crashed:
		return outcomeCrashed, ""
	case err != nil && ctx.Err() != nil:
		return OutcomeTimeout, ""
	case err != nil:
		// Page.navigate reports a page that fails to load in ErrorText;
		// an error is the tab or the browser failing.
		return outcomeCrashed, err.Error()
	case l.download || res.IsDownload:
		return OutcomeDownload, res.ErrorText
	case l.navigatedAway && !l.navigated:
		return OutcomeNavigatedAway, res.ErrorText
	case res.ErrorText != "":
		return OutcomeFailed, res.ErrorText
	}
	return "", ""
}

// settle waits until the page settles, the time runs out, or the tab
// goes away.
func (l *load) settle(ctx context.Context, detached <-chan struct{}) Outcome {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l.mu.Lock()
		crashed := l.crashed
		idle := l.loaded && len(l.inflight) == 0
		wait := l.opts.SettleIdle - time.Since(l.lastActivity)
		l.mu.Unlock()
		if crashed {
			return outcomeCrashed
		}
		var settled <-chan time.Time
		if idle {
			if wait <= 0 {
				return OutcomeSettled
			}
			timer.Reset(wait)
			settled = timer.C
		}
		select {
		case <-ctx.Done():
			return OutcomeTimeout
		case <-detached:
			return outcomeCrashed
		case <-l.changed:
		case <-settled:
		}
	}
}

// paused decides a request paused at its request stage, or hands a
// response to a goroutine of its own (reading a body may take as long as
// the server sends it).
func (l *load) paused(ctx context.Context, ev fetch.EventRequestPaused) {
	if ev.ResponseStatusCode != 0 || ev.ResponseErrorReason != "" {
		l.responses.Go(func() { l.response(ctx, ev) })
		return
	}
	reason, nav := l.decide(ev)
	var err error
	switch {
	case reason == "" && l.fetchedPage(ev):
		_, err = chromedp.Call(ctx, fetch.FulfillRequest, l.fulfill(ev))
	case reason == "":
		_, err = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID, InterceptResponse: new(true)})
	case nav:
		// A navigation answered 204 No Content is dropped and the page
		// stays as it is; failed, it would show an error page.
		_, err = chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: http.StatusNoContent})
	default:
		_, err = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonBlockedByClient})
	}
	_ = err // the request went with its page, or the load is over
}

// fetchedPage reports whether ev, let through, is the page's own request
// and the page was fetched already (As.Document): the first request of the
// main frame's document, not a redirect's. It is then not counted as a
// request: it reaches no server.
func (l *load) fetchedPage(ev fetch.EventRequestPaused) bool {
	if l.doc == nil || ev.ResourceType != network.ResourceTypeDocument || ev.FrameID != l.frame || ev.RedirectedRequestID != "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.served || len(l.docIDs) != 1 {
		return false
	}
	l.served = true
	l.requests--
	l.status = l.doc.Status
	return true
}

// fulfill answers the page's own request with the fetched document.
func (l *load) fulfill(ev fetch.EventRequestPaused) fetch.FulfillRequestParams {
	f := fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: int64(l.doc.Status), Body: l.doc.Body}
	if f.ResponseCode == 0 {
		f.ResponseCode = http.StatusOK
	}
	for name, values := range l.doc.Header {
		switch http.CanonicalHeaderKey(name) {
		case "Content-Encoding", "Content-Length", "Transfer-Encoding", "Connection":
			continue
		}
		for _, v := range values {
			f.ResponseHeaders = append(f.ResponseHeaders, &fetch.HeaderEntry{Name: name, Value: v})
		}
	}
	if l.doc.Header.Get("Content-Type") == "" {
		f.ResponseHeaders = append(f.ResponseHeaders, &fetch.HeaderEntry{Name: "Content-Type", Value: "text/html"})
	}
	return f
}

// decide returns why a request must be blocked ("" to let it through)
// and whether it is a navigation of the main frame away from the page.
func (l *load) decide(ev fetch.EventRequestPaused) (reason string, nav bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closing {
		return "closing", false
	}
	raw := ev.Request.URL
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		l.blocked[BlockedScheme]++
		return BlockedScheme, false
	}
	host := hostOf(u)
	if ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == l.frame {
		own := len(l.docIDs) == 0 || l.docIDs[ev.RedirectedRequestID]
		switch {
		case !own && host != l.target.host:
			reason, nav = BlockedOtherHost, true
		case !own:
			reason, nav = BlockedNavigation, true
		case host != l.target.host:
			reason = BlockedOtherHost // the page's redirect goes elsewhere
		case ev.RedirectedRequestID != "" && l.allow != nil && !l.allow(raw):
			reason = BlockedRobots
		}
		if reason != "" {
			l.navigatedAway = l.navigatedAway || reason != BlockedRobots
			l.blocked[reason]++
			return reason, nav
		}
		l.docIDs[ev.RequestID] = true
	} else {
		switch {
		case blockedType(ev):
			reason = BlockedType
		case host != l.target.host && !l.otherHosts:
			reason = BlockedOtherHost
		case l.allow != nil && !l.allow(raw):
			reason = BlockedRobots
		}
	}
	if reason == "" && l.requests >= l.opts.MaxRequests {
		reason = BlockedMaxRequests
	}
	if reason != "" {
		l.blocked[reason]++
		return reason, false
	}
	l.requests++
	return "", false
}

// response handles a request paused at its response: a download is
// refused; anything else is kept as an Exchange (its body read up to
// MaxBody) and let through.
func (l *load) response(ctx context.Context, ev fetch.EventRequestPaused) {
	if ev.ResponseErrorReason != "" {
		_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
		return
	}
	header := http.Header{}
	for _, h := range ev.ResponseHeaders {
		header.Add(h.Name, h.Value)
	}
	isDoc := ev.ResourceType == network.ResourceTypeDocument && ev.FrameID == l.frame
	if attachment(header) {
		l.mu.Lock()
		l.blocked[BlockedDownload]++
		l.download = l.download || isDoc
		l.mu.Unlock()
		_, _ = chromedp.Call(ctx, fetch.FailRequest, fetch.FailRequestParams{RequestID: ev.RequestID, ErrorReason: network.ErrorReasonAborted})
		return
	}
	ex := Exchange{
		Method:         ev.Request.Method,
		URL:            ev.Request.URL,
		ResourceType:   string(ev.ResourceType),
		RequestHeaders: http.Header{},
		Status:         int(ev.ResponseStatusCode),
		StatusText:     ev.ResponseStatusText,
		Header:         header,
	}
	for k, v := range ev.Request.Headers {
		ex.RequestHeaders.Add(k, fmt.Sprint(v))
	}
	redirect := ex.Status >= 300 && ex.Status < 400 && header.Get("Location") != ""
	n, lenErr := strconv.ParseInt(header.Get("Content-Length"), 10, 64)
	switch {
	case redirect:
	case lenErr == nil && n > int64(l.opts.MaxBody):
		ex.Truncated = true
	default:
		body, err := chromedp.Call(ctx, fetch.GetResponseBody, fetch.GetResponseBodyParams{RequestID: ev.RequestID})
		switch {
		case err != nil:
			ex.Truncated = true
		case len(body.Body) > l.opts.MaxBody:
			ex.Body, ex.Truncated = body.Body[:l.opts.MaxBody], true
		default:
			ex.Body = body.Body
		}
	}
	l.mu.Lock()
	if isDoc && !redirect {
		l.status = ex.Status
	}
	l.exchanges = append(l.exchanges, ex)
	l.mu.Unlock()
	_, _ = chromedp.Call(ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: ev.RequestID})
}

// blockedType tells whether a request is of a kind a page load never
// needs for its text and links: an image (the favicon Chromium asks for
// on its own is of type Other, and asks for an image), media, a font, a
// text track, a beacon, a prefetch, a web app manifest, a CSP report.
func blockedType(ev fetch.EventRequestPaused) bool {
	switch ev.ResourceType {
	case network.ResourceTypeImage, network.ResourceTypeMedia, network.ResourceTypeFont,
		network.ResourceTypeTextTrack, network.ResourceTypePing, network.ResourceTypePrefetch,
		network.ResourceTypeManifest, network.ResourceTypeCSPViolationReport:
		return true
	case network.ResourceTypeOther:
		accept, _ := ev.Request.Headers["Accept"].(string)
		return strings.HasPrefix(accept, "image/")
	}
	return false
}

// attachment tells whether a response is a download.
func attachment(h http.Header) bool {
	v := strings.ToLower(strings.TrimSpace(h.Get("Content-Disposition")))
	return strings.HasPrefix(v, "attachment")
}
