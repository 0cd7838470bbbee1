// Package api is the seeder's crawl-jobs HTTP API: submit a crawl, list
// crawls, read a crawl's specification, status and counts, pause, resume,
// cancel or delete it, and export its documents as JSON lines or any of
// its tables as JSON lines, CSV or Parquet. Every route but the OpenAPI
// description needs the bearer token. It is one face over the crawl-job
// operations (internal/crawljobs), the operator console the other: the
// handlers decode a request, call an operation and encode its answer.
package api

import (
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// Config configures the API.
type Config struct {
	Token        string // bearer token (required)
	MaxBodyBytes int64  // largest accepted request body
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
	cfg      Config
	jobs     *crawljobs.Service
	exporter Exporter
	m        *Metrics
	log      *zap.Logger
}

// New returns a server over the crawl-job operations and the export of
// their documents and tables.
func New(cfg Config, j *crawljobs.Service, export Exporter, m *Metrics, log *zap.Logger) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return &Server{cfg: cfg, jobs: j, exporter: export, m: m, log: log}
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
		if !s.jobs.CaughtUp() {
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

// Status is the HTTP status of a refused or failed crawl-job operation of
// kind k (crawljobs.Error); the console answers with it too.
func Status(k crawljobs.Kind) int {
	switch k {
	case crawljobs.Invalid:
		return http.StatusBadRequest
	case crawljobs.NotFound:
		return http.StatusNotFound
	case crawljobs.Conflict:
		return http.StatusConflict
	case crawljobs.Gone:
		return http.StatusGone
	case crawljobs.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req jobs.Request
	if !s.decode(w, r, &req) {
		return
	}
	resp, err := s.jobs.Create(r.Context(), req)
	var ae *crawljobs.Error
	switch {
	case errors.As(err, &ae) && len(ae.SitemapProblems) > 0:
		writeJSON(w, Status(ae.Kind), struct {
			errorBody
			SitemapProblems []sitemaps.Problem `json:"sitemap_problems,omitempty"`
		}{errorBody{Error: ae.Msg, Fields: ae.Fields}, ae.SitemapProblems})
	case errors.As(err, &ae):
		writeError(w, Status(ae.Kind), ae.Msg, ae.Fields)
	case err != nil:
		return // the client went away: nothing was published
	default:
		writeJSON(w, http.StatusCreated, resp)
	}
}

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
	Crawls []crawljobs.CrawlView `json:"crawls"`
}

func (s *Server) list(w http.ResponseWriter, _ *http.Request) {
	all := s.jobs.Crawls()
	out := ListResponse{Crawls: make([]crawljobs.CrawlView, 0, len(all))}
	for _, spec := range all {
		out.Crawls = append(out.Crawls, crawljobs.Summary(spec))
	}
	writeJSON(w, http.StatusOK, out)
}

// lookup returns the crawl of the {id} path value, or answers 404 for an
// unknown crawl and 410 for a deleted one (gone) and returns nil.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *crawlv1.CrawlSpec {
	id := r.PathValue("id")
	spec := s.jobs.Crawl(id)
	switch {
	case spec == nil:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no crawl %q", id), nil)
		return nil
	case crawlcontrol.Deleted(spec):
		gone(w, crawljobs.Summary(spec))
		return nil
	}
	return spec
}

// goneBody answers a request about a deleted crawl (410): the error and
// the crawl as it was left (status deleted, deleted_at, and in the answer
// of GET /v1/crawls/{id} its deletion's progress).
type goneBody struct {
	errorBody
	crawljobs.CrawlView
}

func gone(w http.ResponseWriter, v crawljobs.CrawlView) {
	writeJSON(w, http.StatusGone, goneBody{
		errorBody: errorBody{Error: fmt.Sprintf("crawl %q was deleted at %s", v.CrawlID, v.DeletedAt.Format(time.RFC3339))},
		CrawlView: v,
	})
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if spec := s.jobs.Crawl(r.PathValue("id")); crawlcontrol.Deleted(spec) {
		gone(w, s.jobs.View(r.Context(), spec))
		return
	}
	spec := s.lookup(w, r)
	if spec == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.jobs.View(r.Context(), spec))
}

// delete deletes a crawl: 202 while ClickHouse removes its rows, 200 once
// none is left (a repeated DELETE says which); 404 for an unknown crawl,
// 400 for an id no crawl can have.
func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	v, err := s.jobs.Delete(r.Context(), r.PathValue("id"))
	if ae := (*crawljobs.Error)(nil); errors.As(err, &ae) {
		writeError(w, Status(ae.Kind), ae.Msg, ae.Fields)
		return
	}
	code := http.StatusAccepted
	if v.Deletion.Done {
		code = http.StatusOK
	}
	writeJSON(w, code, v)
}

func transition(state crawlv1.CrawlState) func(*Server, http.ResponseWriter, *http.Request) {
	return func(s *Server, w http.ResponseWriter, r *http.Request) {
		v, err := s.jobs.SetState(r.Context(), r.PathValue("id"), state)
		if ae := (*crawljobs.Error)(nil); errors.As(err, &ae) {
			writeError(w, Status(ae.Kind), ae.Msg, ae.Fields)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPI)
}
