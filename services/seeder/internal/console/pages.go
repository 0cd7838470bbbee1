package console

import (
	"errors"
	"net/http"
	"net/url"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/keywords"
)

// maxListed bounds the crawls the list shows with their counts.
const maxListed = 50

// crawlRow is one crawl of the list.
type crawlRow struct {
	ID, Name, State string
	Counts          *jobs.Counts
	CountsError     string
	Rate            float64
	Started         time.Time
	Duration        time.Duration
}

type crawlsData struct {
	Crawls  []crawlRow
	Omitted int
	Flash   string
}

// duration is how long a crawl has run: until now, or until its
// cancellation.
func duration(spec *crawlv1.CrawlSpec, now time.Time) time.Duration {
	end := now
	if spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		end = spec.GetUpdatedAt().AsTime()
	}
	return end.Sub(spec.GetCreatedAt().AsTime()).Round(time.Second)
}

func (s *Server) crawls(w http.ResponseWriter, r *http.Request, sess []byte) {
	all := s.jobs.Crawls()
	d := crawlsData{Flash: r.URL.Query().Get("created")}
	if len(all) > maxListed {
		d.Omitted = len(all) - maxListed
		all = all[:maxListed]
	}
	now := s.now()
	d.Crawls = make([]crawlRow, len(all))
	g, ctx := errgroup.WithContext(r.Context())
	g.SetLimit(4)
	for i, spec := range all {
		row := &d.Crawls[i]
		*row = crawlRow{ID: spec.GetCrawlId(), Name: spec.GetName(), State: jobs.Status(spec.GetState(), jobs.Counts{}, false),
			Started: spec.GetCreatedAt().AsTime().UTC(), Duration: duration(spec, now)}
		g.Go(func() error {
			c, err := s.count.Counts(ctx, row.ID)
			if err != nil {
				row.CountsError = err.Error()
				return nil // shown in its row; the other rows still render
			}
			row.Counts = &c
			if spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_RUNNING && c.Finished {
				// Drained needs the pipeline's lag too (the API's view):
				// only for the few crawls whose URLs are all done.
				v := s.jobs.View(ctx, spec)
				row.State, row.Counts = v.Status, v.Counts
				if v.Counts == nil {
					row.Counts = &c
				}
			}
			if row.Rate, err = s.q.rate(ctx, row.ID, row.Started, now); err != nil {
				row.CountsError = err.Error()
			}
			return nil
		})
	}
	_ = g.Wait() // every error is in its row
	p := page{Title: "Crawls", CSRF: s.keys.csrfToken(sess), Data: d}
	running := false
	for _, row := range d.Crawls {
		running = running || row.State == "running"
	}
	if running {
		p.Refresh = s.refresh()
	}
	s.render(w, r, http.StatusOK, "crawls", p)
}

func (s *Server) refresh() int { return int(s.cfg.Refresh / time.Second) }

// formData is the crawl form: its values and its errors by field.
type formData struct {
	V       url.Values
	Errors  formErrors
	Summary []fieldMsg // every error, in the form's order, for the summary
	Engines []string
	Combine []string
	Modes   []string // scope modes (jobs.Scope.Mode)
	// RenderModes are the render modes (jobs.Render.Mode).
	RenderModes []string
}

type fieldMsg struct{ Field, Message string }

// Has reports whether the multi-valued field holds v.
func (f formData) Has(field, v string) bool {
	for _, x := range f.V[field] {
		if x == v {
			return true
		}
	}
	return false
}

func newFormData(v url.Values, errs formErrors) formData {
	d := formData{V: v, Errors: errs, Engines: keywords.PresetNames(), Combine: []string{"each", "combinations", "product"},
		Modes: []string{jobs.ScopeDomain, jobs.ScopeHost, jobs.ScopeWeb}, RenderModes: jobs.RenderModes}
	fields := make([]string, 0, len(errs))
	for f := range errs {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		for _, m := range errs[f] {
			d.Summary = append(d.Summary, fieldMsg{Field: f, Message: m})
		}
	}
	return d
}

func (s *Server) newCrawl(w http.ResponseWriter, r *http.Request, sess []byte) {
	v := url.Values{"politeness.delay": {""}}
	s.render(w, r, http.StatusOK, "new", page{Title: "New crawl", CSRF: s.keys.csrfToken(sess),
		Nav: []crumb{{"Crawls", Prefix}}, Data: newFormData(v, formErrors{})})
}

// submit creates a crawl from the form through the API's Create: its
// errors are the API's, each shown at its field.
func (s *Server) submit(w http.ResponseWriter, r *http.Request, sess []byte) {
	v := r.PostForm
	req, errs := requestFromForm(v)
	back := func(code int) {
		s.render(w, r, code, "new", page{Title: "New crawl", CSRF: s.keys.csrfToken(sess),
			Nav: []crumb{{"Crawls", Prefix}}, Data: newFormData(v, errs)})
	}
	if len(errs) > 0 {
		// Show the API's errors of the rest of the form too (jobs.Build,
		// the validation Create runs, is pure).
		var fe jobs.FieldErrors
		if _, err := jobs.Build(req, func() string { return "unused" }, s.now()); errors.As(err, &fe) {
			mapErrors(fe, errs)
		}
		back(http.StatusBadRequest)
		return
	}
	resp, err := s.jobs.Create(r.Context(), req)
	var ae *crawljobs.Error
	switch {
	case errors.As(err, &ae):
		mapErrors(ae.Fields, errs)
		if len(ae.Fields) == 0 {
			errs.add("", ae.Msg)
		}
		for _, p := range ae.SitemapProblems {
			errs.add("sitemap_urls", p.Source+": "+p.Message)
		}
		back(api.Status(ae.Kind))
		return
	case err != nil:
		return // the client went away
	}
	http.Redirect(w, r, Prefix+"crawls/"+url.PathEscape(resp.CrawlID), http.StatusSeeOther)
}

// actions are the state changes the console offers; delete is no state
// (Delete).
var actions = map[string]struct {
	State   crawlv1.CrawlState
	Verb    string
	Explain string
}{
	"pause":  {crawlv1.CrawlState_CRAWL_STATE_PAUSED, "Pause", "The fetchers stop taking this crawl's URLs; nothing is lost, and resume continues where it stopped."},
	"resume": {crawlv1.CrawlState_CRAWL_STATE_RUNNING, "Resume", "The crawl's URLs are fetched again."},
	"cancel": {crawlv1.CrawlState_CRAWL_STATE_CANCELLED, "Cancel", "The crawl stops for good: its queued URLs are dropped and it cannot be resumed."},
	"delete": {Verb: "Delete", Explain: "The crawl is cancelled for good and everything it left is removed: its rows in every ClickHouse table " +
		"(fetch log, URLs, documents, links, …) and its WARC files and their CDXJ indexes, which each fetcher removes from its directory. " +
		"This cannot be undone; its id stays taken."},
}

type confirmData struct {
	ID, Action, Verb, Explain, State string
}

func (s *Server) confirm(w http.ResponseWriter, r *http.Request, sess []byte) {
	id, act := r.PathValue("id"), r.PathValue("action")
	a, ok := actions[act]
	spec := s.jobs.Crawl(id)
	if !ok || spec == nil {
		s.fail(w, r, http.StatusNotFound, "No such crawl or action.")
		return
	}
	if crawlcontrol.Deleted(spec) {
		s.fail(w, r, http.StatusGone, "The crawl "+id+" was deleted.")
		return
	}
	s.render(w, r, http.StatusOK, "confirm", page{Title: a.Verb + " " + id, CSRF: s.keys.csrfToken(sess),
		Nav:  []crumb{{"Crawls", Prefix}, {id, crawlPath(id)}},
		Data: confirmData{ID: id, Action: act, Verb: a.Verb, Explain: a.Explain, State: jobs.Status(spec.GetState(), jobs.Counts{}, false)}})
}

func (s *Server) transition(w http.ResponseWriter, r *http.Request, _ []byte) {
	id, act := r.PathValue("id"), r.PathValue("action")
	a, ok := actions[act]
	if !ok {
		s.fail(w, r, http.StatusNotFound, "No such action.")
		return
	}
	var err error
	if act == "delete" {
		_, err = s.jobs.Delete(r.Context(), id)
	} else {
		_, err = s.jobs.SetState(r.Context(), id, a.State)
	}
	var ae *crawljobs.Error
	switch {
	case errors.As(err, &ae):
		s.fail(w, r, api.Status(ae.Kind), ae.Msg)
		return
	case err != nil:
		s.fail(w, r, http.StatusServiceUnavailable, err.Error())
		return
	}
	http.Redirect(w, r, crawlPath(id), http.StatusSeeOther)
}

func crawlPath(id string) string { return Prefix + "crawls/" + url.PathEscape(id) }

// crawlData is one crawl's page.
type crawlData struct {
	View            crawljobs.CrawlView
	Spec            *crawlv1.CrawlSpec
	Running         bool
	Settings        crawlsettings.Settings
	Budget          int64         // the page budget that applies; 0: none
	TimeLimit       time.Duration // limits.max_duration; 0: none
	Deadline        time.Time     // when the time limit ends the crawl
	UserAgent       string        // identity.user_agent; "": the fetcher's
	Headers         []string      // identity.headers as "Name: value"
	Priority        []string      // priority.rules as the form writes them
	BreadthFirst    bool          // priority.breadth_first
	Progress        float64
	Rate            float64
	Charts          []chart
	Points          []point
	Depths          []depthRow
	Slowest, Failed []hostRow
	URLDrops        []reasonRow
	LinkDrops       []reasonRow
	Dups, NearDups  uint64
	Search          string
	Docs            []docRow
	Bucket          time.Duration
	// Rules are the crawl's extraction rules with the pages each matched
	// and its fields' misses; NoRule the pages no rule matched.
	Rules  []ruleRow
	NoRule uint64
	// DocumentTypes are the types the crawl keeps beyond HTML (short
	// names); DocTypes its documents by type beyond HTML, ParseErrors
	// the documents the parser could not read, by kind.
	DocumentTypes []string
	// Render is the crawl's render mode as the fetchers resolve it
	// (crawlsettings), RenderSites its per-site modes ("hosts MODE").
	Render      string
	RenderSites []string
	DocTypes    []docTypeRow
	ParseErrors []parseErrorRow
}

func (s *Server) crawl(w http.ResponseWriter, r *http.Request, sess []byte) {
	id := r.PathValue("id")
	spec := s.jobs.Crawl(id)
	if spec == nil {
		s.fail(w, r, http.StatusNotFound, "No crawl "+id+".")
		return
	}
	if crawlcontrol.Deleted(spec) {
		// Nothing to chart: what is left of it is its deletion's progress.
		d := crawlData{Spec: spec, View: s.jobs.View(r.Context(), spec)}
		s.render(w, r, http.StatusOK, "crawl", page{Title: "Crawl " + id, CSRF: s.keys.csrfToken(sess), Nav: []crumb{{"Crawls", Prefix}}, Data: d})
		return
	}
	now := s.now()
	settings := crawlsettings.Resolve(spec, s.cfg.Fleet)
	d := crawlData{Spec: spec, Search: r.URL.Query().Get("q"), Settings: settings, Budget: settings.Pages,
		UserAgent: spec.GetIdentity().GetUserAgent()}
	if end, ok := crawlcontrol.Deadline(spec); ok {
		d.TimeLimit, d.Deadline = spec.GetLimits().GetMaxDuration().AsDuration(), end.UTC()
	}
	for _, h := range spec.GetIdentity().GetHeaders() {
		d.Headers = append(d.Headers, h.GetName()+": "+h.GetValue())
	}
	for _, r := range spec.GetPriority().GetRules() {
		d.Priority = append(d.Priority, formatRule(r))
	}
	d.BreadthFirst = spec.GetPriority().GetBreadthFirst()
	d.DocumentTypes = docTypeNames(spec.GetDocuments())
	d.Render = jobs.RenderModeName(settings.Render)
	for _, site := range spec.GetRender().GetSites() {
		d.RenderSites = append(d.RenderSites, formatRenderSite(site))
	}
	from := spec.GetCreatedAt().AsTime()
	to := now
	if spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		to = spec.GetUpdatedAt().AsTime().Add(time.Minute)
	}
	if to.Sub(from) > 6*time.Hour {
		from = to.Add(-6 * time.Hour)
	}
	g, ctx := errgroup.WithContext(r.Context())
	g.SetLimit(4)
	var kinds []kindPoint
	g.Go(func() error { d.View = s.jobs.View(ctx, spec); return nil })
	g.Go(func() (err error) { d.Rate, err = s.q.rate(ctx, id, spec.GetCreatedAt().AsTime(), now); return err })
	g.Go(func() (err error) {
		// A minute of slack before the start: the fetchers' clocks are
		// not the seeder's.
		if d.Points, d.Bucket, err = s.q.series(ctx, id, from.Add(-time.Minute), to); err != nil {
			return err
		}
		kinds, err = s.q.errorKinds(ctx, id, from.Add(-time.Minute), to, d.Bucket)
		return err
	})
	g.Go(func() (err error) { d.Depths, err = s.q.depths(ctx, id); return err })
	g.Go(func() (err error) { d.Slowest, err = s.q.hosts(ctx, id, "avg_ms DESC, host", "p > 0"); return err })
	g.Go(func() (err error) { d.Failed, err = s.q.hosts(ctx, id, "e DESC, host", "e > 0"); return err })
	g.Go(func() (err error) { d.URLDrops, d.LinkDrops, err = s.q.drops(ctx, id); return err })
	g.Go(func() (err error) { d.Dups, d.NearDups, err = s.q.duplicates(ctx, id); return err })
	g.Go(func() (err error) { d.Docs, err = s.q.documents(ctx, id, d.Search); return err })
	var extracted []extractCount
	if len(spec.GetExtract().GetRules()) > 0 {
		g.Go(func() (err error) { extracted, err = s.q.extraction(ctx, id); return err })
	}
	g.Go(func() (err error) { d.DocTypes, d.ParseErrors, err = s.q.docTypes(ctx, id); return err })
	if err := g.Wait(); err != nil {
		s.queryFailed(w, r, err)
		return
	}
	d.Rules, d.NoRule = ruleRows(spec.GetExtract(), extracted)
	d.Charts = charts(d.Points, kinds, from, to, d.Bucket)
	if c := d.View.Counts; c != nil && d.Budget > 0 {
		d.Progress = min(1, float64(c.Fetched)/float64(d.Budget))
	} else if c != nil && c.Admitted > 0 {
		d.Progress = float64(c.Terminal) / float64(c.Admitted)
	}
	d.Running = d.View.Status == "running"
	p := page{Title: "Crawl " + id, CSRF: s.keys.csrfToken(sess), Nav: []crumb{{"Crawls", Prefix}}, Data: d}
	if d.Running {
		p.Refresh = s.refresh()
	}
	s.render(w, r, http.StatusOK, "crawl", p)
}

// hostData is one host's page.
type hostData struct {
	ID, Host string
	Running  bool
	Totals   hostTotals
	Robots   []robotsRow
	Fetches  []fetchRow
	Traps    []trapRow // URL families ended as trap_suspected
	// Politeness: the crawl's delay, the robots.txt Crawl-delay and its
	// cap, the delay that applies, what the fetch log shows.
	Delay, CrawlDelay, MaxCrawlDelay, Effective time.Duration
	DelayDefault                                bool
	Throttled                                   int       // 429 and 503 answers among the shown attempts
	LastThrottled                               time.Time // the latest of them
	MinGap, MedianGap                           time.Duration
	Last, NextAllowed                           time.Time
}

func (s *Server) host(w http.ResponseWriter, r *http.Request, sess []byte) {
	id, host := r.PathValue("id"), r.PathValue("host")
	spec := s.jobs.Crawl(id)
	if spec == nil {
		s.fail(w, r, http.StatusNotFound, "No crawl "+id+".")
		return
	}
	d := hostData{ID: id, Host: host, Running: spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_RUNNING}
	g, ctx := errgroup.WithContext(r.Context())
	g.Go(func() (err error) { d.Totals, err = s.q.hostTotals(ctx, id, host); return err })
	g.Go(func() (err error) { d.Robots, err = s.q.robots(ctx, host); return err })
	g.Go(func() (err error) { d.Fetches, err = s.q.hostFetches(ctx, id, host); return err })
	g.Go(func() (err error) { d.Traps, err = s.q.hostTraps(ctx, id, host); return err })
	if err := g.Wait(); err != nil {
		s.queryFailed(w, r, err)
		return
	}
	// The delay that applies is the fetcher's rule (libs/hostdelay) on
	// the fleet's flags, the crawl's politeness and robots.txt.
	settings := crawlsettings.Resolve(spec, s.cfg.Fleet)
	d.Delay, _ = settings.Delay(0) // without a Crawl-delay
	d.DelayDefault, d.MaxCrawlDelay = spec.GetPoliteness().GetDelay() == nil, settings.MaxCrawlDelay()
	if len(d.Robots) > 0 {
		d.CrawlDelay = time.Duration(d.Robots[0].CrawlDelayMs) * time.Millisecond
	}
	d.Effective, _ = settings.Delay(d.CrawlDelay)
	var gaps []time.Duration
	for _, f := range d.Fetches {
		if f.Throttled {
			d.Throttled++
			if f.At.After(d.LastThrottled) {
				d.LastThrottled = f.At
			}
		}
		if f.GapMs >= 0 {
			gaps = append(gaps, time.Duration(f.GapMs)*time.Millisecond)
		}
	}
	if len(gaps) > 0 {
		sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
		d.MinGap, d.MedianGap = gaps[0], gaps[len(gaps)/2]
	}
	if len(d.Fetches) > 0 {
		d.Last = d.Fetches[0].At
		d.NextAllowed = d.Last.Add(d.Effective)
	}
	p := page{Title: "Host " + host, CSRF: s.keys.csrfToken(sess), Nav: []crumb{{"Crawls", Prefix}, {id, crawlPath(id)}}, Data: d}
	if d.Running {
		p.Refresh = s.refresh()
	}
	s.render(w, r, http.StatusOK, "host", p)
}

type urlData struct {
	ID, Raw string
	Story   *story
	Error   string
	Running bool
}

func (s *Server) urlStory(w http.ResponseWriter, r *http.Request, sess []byte) {
	id := r.PathValue("id")
	spec := s.jobs.Crawl(id)
	if spec == nil {
		s.fail(w, r, http.StatusNotFound, "No crawl "+id+".")
		return
	}
	d := urlData{ID: id, Raw: r.URL.Query().Get("u"), Running: spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_RUNNING}
	code := http.StatusOK
	if d.Raw != "" {
		st, err := s.q.urlStory(r.Context(), id, d.Raw)
		switch {
		case err != nil && r.Context().Err() != nil:
			return
		case err != nil && st == nil && errors.Is(err, errBadURL):
			d.Error, code = err.Error(), http.StatusBadRequest
		case err != nil:
			s.queryFailed(w, r, err)
			return
		}
		d.Story = st
	}
	p := page{Title: "URL story", CSRF: s.keys.csrfToken(sess), Nav: []crumb{{"Crawls", Prefix}, {id, crawlPath(id)}}, Data: d}
	if d.Running && d.Story != nil {
		p.Refresh = s.refresh()
	}
	s.render(w, r, code, "url", p)
}
