// Package api is the seeder's crawl-jobs HTTP API: submit a crawl, list
// crawls, read a crawl's specification, status and counts, pause, resume,
// cancel or delete it, and export its documents as JSON lines or any of
// its tables as JSON lines, CSV or Parquet. Every route but the OpenAPI
// description needs the bearer token.
package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trawl-crawler/trawl/libs/chexport/exportfile"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// Control publishes and knows crawl specifications (the control topic).
type Control interface {
	// Publish writes spec durably; Get sees it when Publish returns.
	Publish(ctx context.Context, spec *crawlv1.CrawlSpec) error
	// Get returns the latest specification of a crawl, or nil.
	Get(crawlID string) *crawlv1.CrawlSpec
	// All returns every known specification.
	All() []*crawlv1.CrawlSpec
	// PublishSeeds publishes seeds of a crawl, returning how many were acknowledged.
	PublishSeeds(ctx context.Context, crawlID string, seeds []jobs.Seed) (int, error)
	// InFlight returns the records the pipeline has not finished; nil
	// partitions means every partition, otherwise the host-keyed topics
	// count only those (a crawl's partitions).
	InFlight(ctx context.Context, partitions []int) (int64, error)
	// CaughtUp reports whether every specification published before the
	// server started is known; until then the API answers 503.
	CaughtUp() bool
	// Claim claims a new crawl id on the control topic and reports
	// whether this submission owns it (false: another submission, on
	// this server or another, claimed it first). It blocks until the
	// claim is decided.
	Claim(ctx context.Context, crawlID string) (bool, error)
}

// Stats reads a crawl's progress and documents (ClickHouse).
type Stats interface {
	Counts(ctx context.Context, crawlID string) (jobs.Counts, error)
	// Partitions returns the URL-topic partitions of the crawl's admitted URLs.
	Partitions(ctx context.Context, crawlID string) ([]int, error)
	// Documents calls fn per document in URL order until fn fails.
	Documents(ctx context.Context, crawlID string, fn func(jobs.Document) error) error
	// Export writes a crawl's rows of a table to w in a format, nothing
	// before the first row (a crawl without rows is exportfile.ErrNotFound),
	// and returns the rows written.
	Export(ctx context.Context, req exportfile.Request, w io.Writer) (int64, error)
	// CrawlRows returns, per table still holding rows of the crawl, how
	// many (none: an empty map).
	CrawlRows(ctx context.Context, crawlID string) (map[string]uint64, error)
	// Purge starts the removal of the crawl's rows from every table that
	// still holds some (asynchronous: ClickHouse mutations) and returns
	// the rows each held, as CrawlRows.
	Purge(ctx context.Context, crawlID string) (map[string]uint64, error)
}

// SitemapSource reads sitemaps (sitemaps.Discoverer).
type SitemapSource interface {
	Discover(ctx context.Context, seedURLs, sitemapURLs []string) sitemaps.Result
}

// Config configures the API.
type Config struct {
	Token        string // bearer token (required)
	MaxBodyBytes int64  // largest accepted request body
	// Sitemaps reads the sitemaps a request asks for; nil rejects such
	// requests.
	Sitemaps SitemapSource
}

// DefaultMaxBodyBytes is the default request body limit.
const DefaultMaxBodyBytes = 8 << 20

//go:embed openapi.json
var openAPI []byte

// Route is one endpoint.
type Route struct {
	Method, Path string // Path in OpenAPI form: /v1/crawls/{id}
	public       bool
	handler      func(*Server, http.ResponseWriter, *http.Request)
}

// Routes returns every endpoint the server serves.
func Routes() []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/v1/crawls", handler: (*Server).create},
		{Method: http.MethodGet, Path: "/v1/crawls", handler: (*Server).list},
		{Method: http.MethodGet, Path: "/v1/crawls/{id}", handler: (*Server).get},
		{Method: http.MethodDelete, Path: "/v1/crawls/{id}", handler: (*Server).delete},
		{Method: http.MethodPost, Path: "/v1/crawls/{id}/pause", handler: transition(crawlv1.CrawlState_CRAWL_STATE_PAUSED)},
		{Method: http.MethodPost, Path: "/v1/crawls/{id}/resume", handler: transition(crawlv1.CrawlState_CRAWL_STATE_RUNNING)},
		{Method: http.MethodPost, Path: "/v1/crawls/{id}/cancel", handler: transition(crawlv1.CrawlState_CRAWL_STATE_CANCELLED)},
		{Method: http.MethodGet, Path: "/v1/crawls/{id}/documents", handler: (*Server).documents},
		{Method: http.MethodGet, Path: "/v1/crawls/{id}/export", handler: (*Server).export},
		{Method: http.MethodGet, Path: "/v1/openapi.json", public: true, handler: (*Server).openapi},
	}
}

// Metrics are the API's metrics.
type Metrics struct {
	requests *prometheus.CounterVec   // api_requests_total{route,code}
	duration *prometheus.HistogramVec // api_request_duration_seconds{route}
}

// NewMetrics registers the API's metrics on reg (prefixed crawler_seeder_
// by the caller).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "api_requests_total", Help: "Crawl-jobs API requests by route and status code."}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "api_request_duration_seconds", Help: "Crawl-jobs API request duration by route.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}, []string{"route"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register api metrics: %w", err)
		}
	}
	return m, nil
}

// Server serves the API.
type Server struct {
	cfg     Config
	control Control
	stats   Stats
	m       *Metrics
	log     *zap.Logger
	now     func() time.Time
	newID   func() string
	// mu serializes spec changes so that revisions increase one by one.
	mu sync.Mutex
}

// New returns a server.
func New(cfg Config, control Control, stats Stats, m *Metrics, log *zap.Logger) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Server{cfg: cfg, control: control, stats: stats, m: m, log: log, now: time.Now, newID: randomID}
}

// statusRecorder remembers the status code of a response.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush lets the document export stream.
func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// instrument counts requests of route (a bounded label: the route
// pattern, never the crawl id).
func (s *Server) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		// Deferred: an export that fails mid-stream aborts its response
		// with a panic (http.ErrAbortHandler) and is counted too.
		defer func() {
			if rec.code == 0 {
				rec.code = http.StatusOK
			}
			s.m.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
			s.m.duration.WithLabelValues(route).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
	})
}

// Handler returns the HTTP handler of every route.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range Routes() {
		h := r.handler
		var hf http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h(s, w, req) })
		if !r.public {
			hf = s.auth(s.caughtUp(hf))
		}
		pattern := r.Method + " " + r.Path
		mux.Handle(pattern, s.instrument(pattern, hf))
	}
	mux.Handle("/", s.instrument("other", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "no such route", nil)
	})))
	return mux
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "crawl-" + hex.EncodeToString(b[:])
}

func (s *Server) auth(next http.Handler) http.Handler {
	want := []byte("Bearer " + s.cfg.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if s.cfg.Token == "" || subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong bearer token", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// caughtUp answers 503 until the control topic is read to its end, so
// that a restarted server neither accepts a crawl id already used nor
// lists an incomplete set of crawls.
func (s *Server) caughtUp(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.control.CaughtUp() {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "starting: the control topic is not read to its end yet", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// errorBody is every error response.
type errorBody struct {
	Error  string           `json:"error"`
	Fields jobs.FieldErrors `json:"fields,omitempty"`
}

func writeError(w http.ResponseWriter, code int, msg string, fields jobs.FieldErrors) {
	writeJSON(w, code, errorBody{Error: msg, Fields: fields})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

// CrawlView is a crawl as the API shows it.
type CrawlView struct {
	CrawlID     string          `json:"crawl_id"`
	Name        string          `json:"name,omitempty"`
	State       string          `json:"state"`                  // running, paused, cancelled
	Status      string          `json:"status"`                 // state, drained, or deleted (jobs.StatusDeleted)
	StateReason string          `json:"state_reason,omitempty"` // ReasonTimeLimit when its time limit cancelled it
	Revision    uint64          `json:"revision"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Spec        json.RawMessage `json:"spec,omitempty"`
	Counts      *jobs.Counts    `json:"counts,omitempty"`
	CountsError string          `json:"counts_error,omitempty"`
	// DeletedAt is when the crawl was deleted (nil: it was not); Deletion
	// how far its rows are removed, where the answer says.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	Deletion  *Deletion  `json:"deletion,omitempty"`
}

// Deletion is how far a deleted crawl's rows are removed from ClickHouse.
type Deletion struct {
	// Done: no table holds a row of the crawl. Rows the pipeline had in
	// flight when the crawl was deleted may still land afterwards (a
	// fetcher recording the crawl's queued requests as cancelled); the
	// server's sweep (SweepDeleted) removes them too.
	Done bool `json:"done"`
	// RowsLeft is, per table still holding rows of the crawl, how many;
	// ClickHouse removes them in the background (mutations).
	RowsLeft map[string]uint64 `json:"rows_left,omitempty"`
	// Error says why ClickHouse could not be asked or told; the sweep
	// tries again.
	Error string `json:"error,omitempty"`
}

// deletion is the Deletion of rows left per table (as Stats.CrawlRows
// returns them), or of the error that kept them from being counted.
func deletion(left map[string]uint64, err error) *Deletion {
	if err != nil {
		return &Deletion{Error: "clickhouse: " + err.Error()}
	}
	d := &Deletion{Done: true}
	for t, n := range left {
		if n > 0 {
			if d.RowsLeft == nil {
				d.RowsLeft = make(map[string]uint64)
			}
			d.RowsLeft[t], d.Done = n, false
		}
	}
	return d
}

// CreateResponse answers POST /v1/crawls.
type CreateResponse struct {
	CrawlView
	SeedsPublished int              `json:"seeds_published"`
	InvalidSeeds   jobs.FieldErrors `json:"invalid_seeds,omitempty"`
	// SitemapURLs is how many of the published seeds came from sitemaps;
	// SitemapProblems what could not be used (failed sitemaps, invalid
	// entries).
	SitemapURLs     int                `json:"sitemap_urls,omitempty"`
	SitemapProblems []sitemaps.Problem `json:"sitemap_problems,omitempty"`
}

func stateName(s crawlv1.CrawlState) string {
	switch s {
	case crawlv1.CrawlState_CRAWL_STATE_PAUSED:
		return "paused"
	case crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
		return "cancelled"
	}
	return "running"
}

var specJSON = protojson.MarshalOptions{UseProtoNames: true}

// ReasonTimeLimit is the state_reason of a crawl its time limit
// (limits.max_duration) cancelled.
const ReasonTimeLimit = "time limit"

// StateReason is why spec (as control.Get returns it) is in its state
// when an operator did not put it there: ReasonTimeLimit, or "".
func StateReason(spec *crawlv1.CrawlSpec) string {
	if crawlcontrol.EndedByTimeLimit(spec) {
		return ReasonTimeLimit
	}
	return ""
}

func view(spec *crawlv1.CrawlSpec, withSpec bool) CrawlView {
	v := CrawlView{
		CrawlID: spec.GetCrawlId(), Name: spec.GetName(),
		State: stateName(spec.GetState()), Status: stateName(spec.GetState()), StateReason: StateReason(spec),
		Revision:  spec.GetRevision(),
		CreatedAt: spec.GetCreatedAt().AsTime().UTC(), UpdatedAt: spec.GetUpdatedAt().AsTime().UTC(),
	}
	if withSpec {
		if b, err := specJSON.Marshal(spec); err == nil {
			v.Spec = b
		}
	}
	if crawlcontrol.Deleted(spec) {
		at := spec.GetDeletedAt().AsTime().UTC()
		v.DeletedAt, v.Status = &at, jobs.StatusDeleted
	}
	return v
}

// withCounts adds the live counts and status.
func (s *Server) withCounts(ctx context.Context, v *CrawlView, spec *crawlv1.CrawlSpec) {
	c, err := s.stats.Counts(ctx, spec.GetCrawlId())
	if err != nil {
		s.log.Warn("crawl counts unavailable", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		v.CountsError = "counts unavailable: " + err.Error()
		return
	}
	parts, err := s.stats.Partitions(ctx, spec.GetCrawlId())
	if err != nil {
		s.log.Warn("crawl partitions unavailable", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		parts = nil // measure every partition
	}
	if c.InFlight, err = s.control.InFlight(ctx, parts); err != nil {
		s.log.Warn("pipeline lag unavailable", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		c.InFlight = -1
	}
	v.Counts = &c
	v.Status = jobs.Status(spec.GetState(), c, true)
}

// Error is a refused or failed operation: the HTTP status it answers,
// its message, and the problems of each field of the request.
type Error struct {
	Code   int
	Msg    string
	Fields jobs.FieldErrors
	// SitemapProblems are what the sitemaps of a refused request held.
	SitemapProblems []sitemaps.Problem
}

func (e *Error) Error() string {
	if len(e.Fields) > 0 {
		return e.Msg + ": " + e.Fields.Error()
	}
	return e.Msg
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req jobs.Request
	if !s.decode(w, r, &req) {
		return
	}
	resp, err := s.Create(r.Context(), req)
	var ae *Error
	switch {
	case errors.As(err, &ae) && len(ae.SitemapProblems) > 0:
		writeJSON(w, ae.Code, struct {
			errorBody
			SitemapProblems []sitemaps.Problem `json:"sitemap_problems,omitempty"`
		}{errorBody{Error: ae.Msg, Fields: ae.Fields}, ae.SitemapProblems})
	case errors.As(err, &ae):
		writeError(w, ae.Code, ae.Msg, ae.Fields)
	case err != nil:
		return // the client went away: nothing was published
	default:
		writeJSON(w, http.StatusCreated, resp)
	}
}

// Create validates req (jobs.Build: every problem, field by field), reads
// the sitemaps it asks for, and publishes the crawl's specification and
// seeds: what POST /v1/crawls does, for the operator console too. A
// refusal or a publishing failure is an *Error; ctx's end before anything
// was published is ctx's error.
func (s *Server) Create(ctx context.Context, req jobs.Request) (CreateResponse, error) {
	job, err := jobs.Build(req, s.newID, s.now())
	var fe jobs.FieldErrors
	switch {
	case errors.As(err, &fe):
		return CreateResponse{}, &Error{Code: http.StatusBadRequest, Msg: "invalid request", Fields: fe}
	case err != nil:
		return CreateResponse{}, &Error{Code: http.StatusBadRequest, Msg: err.Error()}
	}
	id := job.Spec.GetCrawlId()
	if err := s.exists(id); err != nil {
		return CreateResponse{}, err
	}
	var (
		fromSitemaps int
		problems     []sitemaps.Problem
	)
	if job.Sitemaps || len(job.SitemapURLs) > 0 {
		if s.cfg.Sitemaps == nil {
			return CreateResponse{}, &Error{Code: http.StatusBadRequest, Msg: "invalid request",
				Fields: jobs.FieldErrors{{Field: "sitemaps", Message: "sitemap seeding is not enabled on this server"}}}
		}
		// Read before taking the lock: it may take a while.
		var hosts []string
		if job.Sitemaps {
			for _, sd := range job.Seeds {
				if sd.Engine == "" {
					hosts = append(hosts, sd.URL)
				}
			}
		}
		res := s.cfg.Sitemaps.Discover(ctx, hosts, job.SitemapURLs)
		if err := ctx.Err(); err != nil {
			return CreateResponse{}, fmt.Errorf("read sitemaps: %w", err)
		}
		urls := make([]string, len(res.Entries))
		lastmods := make([]time.Time, len(res.Entries))
		for i, e := range res.Entries {
			urls[i], lastmods[i] = e.URL, e.Lastmod
		}
		fromSitemaps = job.AddSitemapEntries(urls, lastmods)
		problems = res.Problems
		if len(job.Seeds) == 0 {
			return CreateResponse{}, &Error{Code: http.StatusBadRequest, Msg: "invalid request",
				Fields:          jobs.FieldErrors{{Field: "sitemap_urls", Message: "no valid seeds: the sitemaps listed no usable URL"}},
				SitemapProblems: problems}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.exists(id); err != nil {
		return CreateResponse{}, err
	}
	// The id is free as far as this server knows; other API servers may
	// be accepting it right now: the control topic decides.
	owned, err := s.control.Claim(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			// The client went away: the claim, if written, keeps the id taken.
			return CreateResponse{}, fmt.Errorf("claim crawl id: %w", ctx.Err())
		}
		s.log.Error("claim crawl id failed", telemetry.Crawl(id), zap.Error(err))
		return CreateResponse{}, &Error{Code: http.StatusServiceUnavailable, Msg: "claim crawl id: " + err.Error()}
	}
	if !owned {
		return CreateResponse{}, conflict(id)
	}
	if err := s.control.Publish(ctx, job.Spec); err != nil {
		s.log.Error("publish crawl spec failed", telemetry.Crawl(id), zap.Error(err))
		return CreateResponse{}, &Error{Code: http.StatusServiceUnavailable, Msg: "publish crawl spec: " + err.Error()}
	}
	n, err := s.control.PublishSeeds(ctx, id, job.Seeds)
	if err != nil {
		s.log.Error("publish seeds failed", telemetry.Crawl(id), zap.Int("published", n), zap.Error(err))
		return CreateResponse{}, &Error{Code: http.StatusServiceUnavailable, Msg: fmt.Sprintf("crawl created; %d of %d seeds published: %v", n, len(job.Seeds), err)}
	}
	s.log.Info("crawl created", telemetry.Crawl(id), zap.Int("seeds", n), zap.Int("invalid", len(job.Invalid)),
		zap.Int("from_sitemaps", fromSitemaps), zap.Int("sitemap_problems", len(problems)))
	return CreateResponse{CrawlView: view(job.Spec, true), SeedsPublished: n, InvalidSeeds: job.Invalid,
		SitemapURLs: fromSitemaps, SitemapProblems: problems}, nil
}

// exists refuses (409) a crawl id that is taken, by a crawl or by a
// deleted crawl.
func (s *Server) exists(id string) error {
	spec := s.control.Get(id)
	switch {
	case spec == nil:
		return nil
	case crawlcontrol.Deleted(spec):
		return &Error{Code: http.StatusConflict, Msg: fmt.Sprintf("crawl %q was deleted; its id stays taken", id),
			Fields: jobs.FieldErrors{{Field: "crawl_id", Message: "already used by a deleted crawl"}}}
	}
	return conflict(id)
}

// conflict is the 409 of a crawl id that is taken (by a crawl, or by an
// earlier claim of another submission).
func conflict(id string) *Error {
	return &Error{Code: http.StatusConflict, Msg: fmt.Sprintf("crawl %q exists", id),
		Fields: jobs.FieldErrors{{Field: "crawl_id", Message: "already used"}}}
}

// decode reads a JSON body of at most MaxBodyBytes with no unknown fields
// (jobs.Decode, which the seeder's --spec and the local launcher share).
func (s *Server) decode(w http.ResponseWriter, r *http.Request, req *jobs.Request) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "want Content-Type application/json", nil)
		return false
	}
	var err error
	*req, err = jobs.Decode(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	var (
		tooBig *http.MaxBytesError
		fe     jobs.FieldErrors
	)
	switch {
	case err == nil:
		return true
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", tooBig.Limit), nil)
	case errors.As(err, &fe):
		writeError(w, http.StatusBadRequest, "invalid request", fe)
	default:
		writeError(w, http.StatusBadRequest, err.Error(), nil)
	}
	return false
}

// ListResponse answers GET /v1/crawls.
type ListResponse struct {
	Crawls []CrawlView `json:"crawls"`
}

// Crawls returns the specification of every crawl but the deleted ones,
// newest first.
func (s *Server) Crawls() []*crawlv1.CrawlSpec {
	all := slices.DeleteFunc(s.control.All(), crawlcontrol.Deleted)
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].GetCreatedAt().AsTime(), all[j].GetCreatedAt().AsTime()
		if !a.Equal(b) {
			return a.After(b)
		}
		return all[i].GetCrawlId() < all[j].GetCrawlId()
	})
	return all
}

// CaughtUp reports whether the control topic is read to its end (before,
// the API and the console answer 503).
func (s *Server) CaughtUp() bool { return s.control.CaughtUp() }

// Crawl returns the latest specification of a crawl, or nil; a deleted
// crawl's too (crawlcontrol.Deleted).
func (s *Server) Crawl(id string) *crawlv1.CrawlSpec { return s.control.Get(id) }

// View returns a crawl as GET /v1/crawls/{id} shows it: its specification,
// its live counts and its status; a deleted crawl's with its Deletion
// instead of counts.
func (s *Server) View(ctx context.Context, spec *crawlv1.CrawlSpec) CrawlView {
	v := view(spec, true)
	if crawlcontrol.Deleted(spec) {
		left, err := s.stats.CrawlRows(ctx, spec.GetCrawlId())
		if err != nil {
			s.log.Warn("rows of a deleted crawl not counted", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		}
		v.Deletion = deletion(left, err)
		return v
	}
	s.withCounts(ctx, &v, spec)
	return v
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	all := s.Crawls()
	out := ListResponse{Crawls: make([]CrawlView, 0, len(all))}
	for _, spec := range all {
		out.Crawls = append(out.Crawls, view(spec, false))
	}
	writeJSON(w, http.StatusOK, out)
}

// lookup returns the crawl of the {id} path value, or answers 404 for an
// unknown crawl and 410 for a deleted one (gone) and returns nil.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *crawlv1.CrawlSpec {
	id := r.PathValue("id")
	spec := s.control.Get(id)
	switch {
	case spec == nil:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no crawl %q", id), nil)
		return nil
	case crawlcontrol.Deleted(spec):
		gone(w, view(spec, false))
		return nil
	}
	return spec
}

// goneBody answers a request about a deleted crawl (410): the error and
// the crawl as it was left (status deleted, deleted_at, and in the answer
// of GET /v1/crawls/{id} its deletion's progress).
type goneBody struct {
	errorBody
	CrawlView
}

func gone(w http.ResponseWriter, v CrawlView) {
	writeJSON(w, http.StatusGone, goneBody{
		errorBody: errorBody{Error: fmt.Sprintf("crawl %q was deleted at %s", v.CrawlID, v.DeletedAt.Format(time.RFC3339))},
		CrawlView: v,
	})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if spec := s.control.Get(r.PathValue("id")); crawlcontrol.Deleted(spec) {
		gone(w, s.View(r.Context(), spec))
		return
	}
	spec := s.lookup(w, r)
	if spec == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.View(r.Context(), spec))
}

// delete deletes a crawl: 202 while ClickHouse removes its rows, 200 once
// none is left (a repeated DELETE says which); 404 for an unknown crawl,
// 400 for an id no crawl can have.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	v, err := s.Delete(r.Context(), r.PathValue("id"))
	if ae := (*Error)(nil); errors.As(err, &ae) {
		writeError(w, ae.Code, ae.Msg, ae.Fields)
		return
	}
	code := http.StatusAccepted
	if v.Deletion.Done {
		code = http.StatusOK
	}
	writeJSON(w, code, v)
}

// Delete deletes a crawl: it publishes the crawl's next revision,
// cancelled for good and marked deleted (jobs.Delete; every service stops
// the crawl as it does on a cancel, and the schedulers drop its seen
// sets), then starts the removal of its rows from every ClickHouse table
// that holds some (Stats.Purge) and returns the crawl with its Deletion.
// Deleting a deleted crawl publishes nothing and starts the removal of
// what is left (rows that landed since, or whose removal failed). The
// specification stays on the control topic: a crawl id without one would
// run on every service's defaults. A refusal (an invalid id: 400, no such
// crawl: 404) or a publishing failure is an *Error; a ClickHouse failure
// is in the Deletion, as the sweep (SweepDeleted) tries again.
func (s *Server) Delete(ctx context.Context, id string) (CrawlView, error) {
	if !jobs.ValidCrawlID(id) {
		return CrawlView{}, &Error{Code: http.StatusBadRequest, Msg: "invalid crawl id",
			Fields: jobs.FieldErrors{{Field: "id", Message: fmt.Sprintf("%q: want 1-%d letters, digits, '.', '_' or '-'", id, jobs.MaxCrawlID)}}}
	}
	spec, err := s.markDeleted(ctx, id)
	if err != nil {
		return CrawlView{}, err
	}
	v := view(spec, true)
	left, err := s.stats.Purge(ctx, id)
	if err != nil {
		s.log.Warn("rows of a deleted crawl not removed yet, the sweep retries", telemetry.Crawl(id), zap.Error(err))
	}
	v.Deletion = deletion(left, err)
	return v, nil
}

// markDeleted publishes the deleting revision of a crawl unless it is
// deleted already, and returns the crawl's specification.
func (s *Server) markDeleted(ctx context.Context, id string) (*crawlv1.CrawlSpec, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spec := s.control.Get(id)
	switch {
	case spec == nil:
		return nil, &Error{Code: http.StatusNotFound, Msg: fmt.Sprintf("no crawl %q", id)}
	case crawlcontrol.Deleted(spec):
		return spec, nil
	}
	next := jobs.Delete(spec, s.now())
	if err := s.control.Publish(ctx, next); err != nil {
		s.log.Error("publish crawl spec failed", telemetry.Crawl(id), zap.Error(err))
		return nil, &Error{Code: http.StatusServiceUnavailable, Msg: "publish crawl spec: " + err.Error()}
	}
	s.log.Info("crawl deleted", telemetry.Crawl(id), zap.Uint64("revision", next.GetRevision()))
	return next, nil
}

// SweepDeleted removes, every interval until ctx is done, the rows of
// deleted crawls that are still in ClickHouse (Stats.Purge): rows the
// pipeline had in flight when the crawl was deleted land after its
// mutations were created, and a mutation applies only to the rows that
// were there. A crawl is swept until a pass finds none of its rows once
// settle has passed since its deletion (the time its in-flight records
// take to drain), then no more by this process; a restarted server checks
// every deleted crawl once again. Each pass costs one count query per
// deleted crawl not settled, and a mutation only where rows are left and
// none is pending. Several API servers may sweep: a pending mutation is
// not repeated.
func (s *Server) SweepDeleted(ctx context.Context, interval, settle time.Duration) error {
	settled := make(map[string]bool)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.sweep(ctx, settled, settle)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// sweep is one pass of SweepDeleted.
func (s *Server) sweep(ctx context.Context, settled map[string]bool, settle time.Duration) {
	for _, spec := range s.control.All() {
		id := spec.GetCrawlId()
		if !crawlcontrol.Deleted(spec) || settled[id] || ctx.Err() != nil {
			continue
		}
		left, err := s.stats.Purge(ctx, id)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("rows of a deleted crawl not removed, retried at the next sweep", telemetry.Crawl(id), zap.Error(err))
			}
		case len(left) > 0:
			s.log.Info("removing rows of a deleted crawl", telemetry.Crawl(id), zap.Any("rows_left", left))
		case s.now().Sub(spec.GetDeletedAt().AsTime()) >= settle:
			settled[id] = true
		}
	}
}

func transition(state crawlv1.CrawlState) func(*Server, http.ResponseWriter, *http.Request) {
	return func(s *Server, w http.ResponseWriter, r *http.Request) {
		v, err := s.SetState(r.Context(), r.PathValue("id"), state)
		if ae := (*Error)(nil); errors.As(err, &ae) {
			writeError(w, ae.Code, ae.Msg, ae.Fields)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// SetState pauses, resumes or cancels a crawl (idempotent: a crawl in
// state already is returned as it is); a refusal (no such crawl: 404, a
// cancelled crawl: 409, a deleted crawl: 410) or a publishing failure is
// an *Error.
func (s *Server) SetState(ctx context.Context, id string, state crawlv1.CrawlState) (CrawlView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spec := s.control.Get(id)
	switch {
	case spec == nil:
		return CrawlView{}, &Error{Code: http.StatusNotFound, Msg: fmt.Sprintf("no crawl %q", id)}
	case crawlcontrol.Deleted(spec):
		return CrawlView{}, &Error{Code: http.StatusGone, Msg: fmt.Sprintf("crawl %q was deleted", id)}
	}
	if spec.GetState() == state {
		return view(spec, true), nil
	}
	next, err := jobs.Transition(spec, state, s.now())
	if err != nil {
		msg := err.Error()
		if StateReason(spec) == ReasonTimeLimit {
			msg += " (its time limit, limits.max_duration, has passed)"
		}
		return CrawlView{}, &Error{Code: http.StatusConflict, Msg: msg}
	}
	if err := s.control.Publish(ctx, next); err != nil {
		s.log.Error("publish crawl spec failed", telemetry.Crawl(id), zap.Error(err))
		return CrawlView{}, &Error{Code: http.StatusServiceUnavailable, Msg: "publish crawl spec: " + err.Error()}
	}
	s.log.Info("crawl state changed", telemetry.Crawl(id), zap.String("state", stateName(state)), zap.Uint64("revision", next.GetRevision()))
	return view(next, true), nil
}

func (s *Server) documents(w http.ResponseWriter, r *http.Request) {
	spec := s.lookup(w, r)
	if spec == nil {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	n := 0
	err := s.stats.Documents(r.Context(), spec.GetCrawlId(), func(d jobs.Document) error {
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		if n++; n%100 == 0 && flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	if err != nil {
		s.log.Warn("document export aborted", telemetry.Crawl(spec.GetCrawlId()), zap.Int("documents", n), zap.Error(err))
		if n == 0 { // nothing written yet: a proper error response
			writeError(w, http.StatusInternalServerError, "export documents: "+err.Error(), nil)
		}
		// Otherwise the headers are sent and the client sees a truncated
		// stream.
	}
}

// export streams one table of a crawl as a file (libs/chexport): 400 for
// an unknown table or format, 404 for an unknown crawl or one without rows
// in the table. Once the first row is written the status is sent; a later
// failure aborts the response, so that the client sees a broken transfer
// rather than a short file that looks complete.
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	table, terr := exportfile.ParseTable(q.Get("table"))
	format, ferr := exportfile.ParseFormat(q.Get("format"))
	if terr != nil || ferr != nil {
		var fields jobs.FieldErrors
		if terr != nil {
			fields = append(fields, jobs.FieldError{Field: "table", Message: terr.Error()})
		}
		if ferr != nil {
			fields = append(fields, jobs.FieldError{Field: "format", Message: ferr.Error()})
		}
		writeError(w, http.StatusBadRequest, errors.Join(terr, ferr).Error(), fields)
		return
	}
	spec := s.lookup(w, r)
	if spec == nil {
		return
	}
	id := spec.GetCrawlId()
	h := w.Header()
	h.Set("Content-Type", format.ContentType())
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": exportfile.FileName(id, table, format)}))
	cw := &countWriter{w: w}
	n, err := s.stats.Export(r.Context(), exportfile.Request{CrawlID: id, Table: table, Format: format}, cw)
	if err == nil {
		return
	}
	if cw.n == 0 { // nothing written: a proper error response
		h.Del("Content-Disposition")
		if errors.Is(err, exportfile.ErrNotFound) {
			writeError(w, http.StatusNotFound, err.Error(), nil)
			return
		}
		s.log.Warn("export failed", telemetry.Crawl(id), zap.String("table", string(table)), zap.Error(err))
		writeError(w, http.StatusInternalServerError, "export "+string(table)+": "+err.Error(), nil)
		return
	}
	s.log.Warn("export aborted", telemetry.Crawl(id), zap.String("table", string(table)), zap.Int64("rows", n), zap.Error(err))
	panic(http.ErrAbortHandler)
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
