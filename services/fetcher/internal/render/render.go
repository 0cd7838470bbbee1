// Package render renders fetched pages in a headless browser within their
// host's turn: a page fetched with a 200 that its crawl's render mode says
// needs it (rendersniff) is loaded from its fetched body, as its crawl
// (its robots.txt decides every request the page makes, its user agent
// and headers go with them), and the DOM the page's scripts built becomes
// its body. With an archive that keeps renderings, what the browser
// fetched is archived too, as Browsertrix archives a browser session.
//
// The fetcher's consume package calls Render between the fetch and the
// end of the host's turn, so the host's delay runs from the end of the
// load.
package render

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// Loader loads a page in a browser (*browser.Browser). Safe for concurrent
// use; LoadAs blocks for at most its page timeout.
type Loader interface {
	LoadAs(ctx context.Context, url string, as browser.As) (*browser.Page, error)
}

// Archiver archives what a browser fetched while it rendered a page
// (*warc.Writer). ArchiveRender blocks until the records are written;
// safe for concurrent use.
type Archiver interface {
	ArchiveRender(ctx context.Context, req *crawlv1.FetchRequest, res *httpfetch.Response, page *browser.Page) error
}

// Renderer renders the pages that need it. Safe for concurrent use.
type Renderer struct {
	browser Loader   // nil: no browser, pages that need one are kept as fetched
	archive Archiver // nil: renderings are not archived
	log     *zap.Logger

	renders  *prometheus.CounterVec // outcome: browser.Outcomes, error
	verdicts *prometheus.CounterVec // reason: rendersniff.Reasons and the modes'
	duration prometheus.Histogram
}

// New returns a Renderer that loads pages in b (nil: none; the pages that
// need a browser are counted as no_browser and kept as fetched) and
// archives their renderings in archive (nil: not archived). reg receives
// its metrics.
func New(b Loader, archive Archiver, log *zap.Logger, reg prometheus.Registerer) (*Renderer, error) {
	r := &Renderer{
		browser: b, archive: archive, log: log,
		renders: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renders_total",
			Help: "Pages loaded in the headless browser (--render), by how the load ended (browser outcomes, or error: the tab or the browser failed); a settled or timed-out load's DOM replaced the fetched body.",
		}, []string{"outcome"}),
		verdicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "render_verdicts_total",
			Help: "Pages fetched with a 200 that the render mode looked at, by the reason it rendered them or not (rendersniff).",
		}, []string{"reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "render_duration_seconds",
			Help:    "Time a page load in the headless browser took, within its host's turn.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30},
		}),
	}
	for _, c := range []prometheus.Collector{r.renders, r.verdicts, r.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register render metrics: %w", err)
		}
	}
	return r, nil
}

// Render replaces the body of res, the page req of host fetched, with the
// DOM the browser builds from it when the page came with a 200 and its
// crawl's render mode (set.RenderOf) says it needs it. The browser reads
// the page from the fetched body (it is not asked of the site again) and
// asks the site only for what the page's scripts and styles need, as the
// crawl: its robots.txt (rules) decides every request to host, and its
// user agent and headers go with them. A load that fails, or that a page
// ends otherwise than settled (or out of time, with the DOM as it stood),
// leaves the body as fetched.
func (r *Renderer) Render(ctx context.Context, req *crawlv1.FetchRequest, host string, res *httpfetch.Response, rules *robots.Rules, set crawlsettings.Settings) {
	if res.Status != http.StatusOK || res.Truncated || len(res.Body) == 0 {
		return
	}
	v := rendersniff.ModeOf(set.RenderOf(host)).Render(res.Body, res.ContentType)
	if v.Render && r.browser == nil {
		v = rendersniff.Verdict{Reason: rendersniff.ReasonNoBrowser}
	}
	r.verdicts.WithLabelValues(v.Reason).Inc()
	if !v.Render {
		return
	}
	var headers map[string]string
	if hs := set.Identity.Headers; len(hs) > 0 {
		headers = make(map[string]string, len(hs))
		for _, hd := range hs {
			headers[hd.Name] = hd.Value
		}
	}
	start := time.Now()
	page, err := r.browser.LoadAs(ctx, req.GetUrl(), browser.As{
		Document: &browser.Document{Status: res.Status, Body: res.Body,
			Header: http.Header{"Content-Type": {res.ContentType + "; charset=utf-8"}}},
		Allow: func(u string) bool {
			if k, err := urlcanon.PolitenessKey(u); err == nil && k != host {
				return true // another host (render.other_hosts): not crawled, so no robots.txt of its own is read
			}
			return rules.Check(u) == robots.Allowed
		},
		UserAgent: set.Identity.UserAgent, Headers: headers, OtherHosts: set.RenderOtherHosts,
	})
	r.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		r.renders.WithLabelValues("error").Inc()
		r.log.Warn("kept a page as fetched, its rendering failed", telemetry.URL(req.GetUrl()), zap.Error(err))
		return
	}
	r.renders.WithLabelValues(string(page.Outcome)).Inc()
	r.archiveRender(ctx, req, res, page)
	if page.HTML == "" || (page.Outcome != browser.OutcomeSettled && page.Outcome != browser.OutcomeTimeout) {
		return
	}
	res.Body, res.Rendered = []byte(page.HTML), string(page.Outcome)
}

// archiveRender writes the rendering of req's page, fetched as res, to the
// archive when there is one: the requests and responses the browser saw,
// the DOM and how the load went. The page's own records follow, as
// fetched. A load cut short by ctx is not archived: its page goes back to
// its queue, to be fetched and rendered again. A failure is logged and
// the page archived without its rendering: its fetch, the record of what
// was crawled, is archived (or left unacked) on its own.
func (r *Renderer) archiveRender(ctx context.Context, req *crawlv1.FetchRequest, res *httpfetch.Response, page *browser.Page) {
	if r.archive == nil || ctx.Err() != nil {
		return
	}
	if err := r.archive.ArchiveRender(ctx, req, res, page); err != nil {
		r.log.Warn("archived a page without its rendering's records", telemetry.URL(req.GetUrl()), zap.Error(err))
	}
}
