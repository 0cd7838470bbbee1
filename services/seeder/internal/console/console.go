// Package console is the seeder's operator console: server-rendered HTML
// pages under /ui/ of the crawl-jobs API's server, behind the API's token.
// Like the JSON API it is a face over the crawl-job operations
// (internal/crawljobs). The crawls and their counters, a form that submits
// a crawl through the API's own validation (its field errors shown at
// their fields), pause, resume, cancel and delete with a confirmation, one
// crawl's charts and tables, one host's politeness and fetch log, one
// URL's story, all read from ClickHouse with bounded queries filtered on
// the tables' sort keys.
//
// Templates, CSS and the small script (fetch-and-swap of the live parts)
// are embedded; there is no build step. Every page reads without
// JavaScript and refreshes itself (a meta refresh in noscript) while its
// crawl runs.
//
// Security: a login form takes the token (never in a URL) and sets an
// HttpOnly, SameSite=Strict session cookie (auth.go); every other page and
// asset answers 401 without it; every POST needs the session's CSRF token
// and a same-origin Origin / Sec-Fetch-Site.
package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// Prefix is where the console is served.
const Prefix = "/ui/"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

//go:embed static/console.css
var consoleCSS string

// csp is the pages' Content-Security-Policy: no inline script or style.
const csp = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Jobs is the crawl-job operations the console drives
// (*crawljobs.Service): the same validation, publishing and counts as the
// JSON API.
type Jobs interface {
	Create(ctx context.Context, req jobs.Request) (crawljobs.CreateResponse, error)
	SetState(ctx context.Context, id string, state crawlv1.CrawlState) (crawljobs.CrawlView, error)
	// Delete deletes a crawl (DELETE /v1/crawls/{id}): cancelled for
	// good, marked deleted, its rows removed from ClickHouse; the
	// fetchers remove its WARC files when they see the mark.
	Delete(ctx context.Context, id string) (crawljobs.CrawlView, error)
	Crawls() []*crawlv1.CrawlSpec
	Crawl(id string) *crawlv1.CrawlSpec
	View(ctx context.Context, spec *crawlv1.CrawlSpec) crawljobs.CrawlView
	CaughtUp() bool
}

// Counter reads a crawl's counts (*stats.Stats).
type Counter interface {
	Counts(ctx context.Context, crawlID string) (jobs.Counts, error)
}

// Config configures the console.
type Config struct {
	Token string // the API token (required)
	// Partitions is the URL topics' partition count (url_seen and the
	// frontier are keyed by partition first).
	Partitions int
	// Refresh is how often a running crawl's pages refresh (default 5 s).
	Refresh time.Duration
	// Fleet is the services' own flags that a crawl's specification may
	// override (the fetchers' --delay and --max-crawl-delay, zero: the
	// defaults; the fleet's --max-pages and --max-depth), for the
	// settings a crawl page and a host page say apply
	// (crawlsettings.Resolve, as the services resolve them).
	Fleet crawlsettings.Fleet
}

// Metrics are the console's metrics.
type Metrics struct {
	requests *prometheus.CounterVec // console_requests_total{page,code}
}

// NewMetrics registers the console's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "console_requests_total",
		Help: "Operator console requests by page and status code."}, []string{"page", "code"})}
	if err := reg.Register(m.requests); err != nil {
		return nil, fmt.Errorf("register console metrics: %w", err)
	}
	return m, nil
}

// Server serves the console. Safe for concurrent use.
type Server struct {
	cfg   Config
	keys  keys
	jobs  Jobs
	count Counter
	q     *queries
	m     *Metrics
	log   *zap.Logger
	now   func() time.Time
	pages map[string]*template.Template
}

// New returns the console over the crawl-job operations, the crawls'
// counts and a ClickHouse connection (not closed by the console).
func New(cfg Config, j Jobs, count Counter, conn driver.Conn, m *Metrics, log *zap.Logger) (*Server, error) {
	if cfg.Token == "" {
		return nil, errors.New("console: no token")
	}
	if cfg.Partitions <= 0 {
		return nil, errors.New("console: partitions must be positive")
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	s := &Server{cfg: cfg, keys: newKeys(cfg.Token), jobs: j, count: count, q: &queries{conn: conn, partitions: cfg.Partitions},
		m: m, log: log, now: time.Now, pages: map[string]*template.Template{}}
	for _, p := range []string{"login", "crawls", "new", "crawl", "confirm", "host", "url", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("parse console template %s: %w", p, err)
		}
		s.pages[p] = t
	}
	return s, nil
}

// statusRecorder remembers a response's status code.
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

// Handler returns the console's handler; mount it at Prefix.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, page string, public bool, h func(http.ResponseWriter, *http.Request, []byte)) {
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w}
			s.serve(rec, r, public, h)
			if rec.code == 0 {
				rec.code = http.StatusOK
			}
			s.m.requests.WithLabelValues(page, strconv.Itoa(rec.code)).Inc()
		}))
	}
	handle("GET /ui/login", "login", true, s.loginPage)
	handle("POST /ui/login", "login", true, s.login)
	handle("POST /ui/logout", "logout", false, s.logout)
	handle("GET /ui/static/{file}", "static", false, s.static)
	handle("GET /ui/{$}", "crawls", false, s.crawls)
	handle("GET /ui/new", "new", false, s.newCrawl) // not under crawls/: "new" is a valid crawl id
	handle("POST /ui/crawls", "new", false, s.submit)
	handle("GET /ui/crawls/{id}", "crawl", false, s.crawl)
	handle("GET /ui/crawls/{id}/{action}", "confirm", false, s.confirm)
	handle("POST /ui/crawls/{id}/{action}", "transition", false, s.transition)
	handle("GET /ui/crawls/{id}/hosts/{host}", "host", false, s.host)
	handle("GET /ui/crawls/{id}/url", "url", false, s.urlStory)
	handle("/ui/", "other", false, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		s.fail(w, r, http.StatusNotFound, "No such page.")
	})
	return mux
}

// serve applies the console's headers, authentication and CSRF checks.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, public bool, h func(http.ResponseWriter, *http.Request, []byte)) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Content-Security-Policy", csp)
	if public {
		h(w, r, nil)
		return
	}
	var sess []byte
	if c, err := r.Cookie(cookieName); err == nil {
		sess = s.keys.session(c.Value, s.now())
	}
	if sess == nil {
		w.Header().Set("WWW-Authenticate", `Cookie realm="trawl console", form="/ui/login"`)
		s.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in", Data: loginData{Next: safeNext(r.URL.RequestURI())}})
		return
	}
	if r.Method == http.MethodPost {
		if !sameOrigin(r) {
			s.fail(w, r, http.StatusForbidden, "Cross-site request refused.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			s.fail(w, r, http.StatusBadRequest, "Unreadable form: "+err.Error())
			return
		}
		if !s.keys.csrfOK(sess, r.PostFormValue("csrf")) {
			s.fail(w, r, http.StatusForbidden, "The form's CSRF token is missing or belongs to another session: reload the page and submit again.")
			return
		}
	}
	if !s.jobs.CaughtUp() {
		w.Header().Set("Retry-After", "1")
		s.fail(w, r, http.StatusServiceUnavailable, "Starting: the control topic is not read to its end yet.")
		return
	}
	h(w, r, sess)
}

// maxFormBytes bounds a posted form (a crawl's seeds included).
const maxFormBytes = 8 << 20

// page is what the layout renders.
type page struct {
	// Nonce, on the pages served without a session (the login form),
	// lets the stylesheet inline: the static files need a session.
	Nonce   string
	CSS     template.CSS
	Title   string
	CSRF    string
	Refresh int // seconds; 0: the page does not refresh
	Nav     []crumb
	Data    any
}

type crumb struct{ Name, Href string }

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	t := s.pages[name]
	if p.CSRF == "" { // no session: no static files
		var n [16]byte
		_, _ = rand.Read(n[:])                                              // crypto/rand.Read never fails
		p.Nonce, p.CSS = b64.EncodeToString(n[:]), template.CSS(consoleCSS) // our own embedded stylesheet
		w.Header().Set("Content-Security-Policy", strings.Replace(csp, "style-src 'self'", "style-src 'nonce-"+p.Nonce+"'", 1))
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		s.log.Error("render console page failed", zap.String("page", name), zap.Error(err))
		http.Error(w, "render page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes()) // the client went away: nothing to do
	_ = r
}

type errorData struct{ Message string }

func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", page{Title: http.StatusText(code), Data: errorData{Message: msg}})
}

// queryFailed answers 500 for a ClickHouse error.
func (s *Server) queryFailed(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	s.log.Warn("console query failed", zap.String("path", r.URL.Path), zap.Error(err))
	s.fail(w, r, http.StatusInternalServerError, "ClickHouse query failed: "+err.Error())
}

func (s *Server) static(w http.ResponseWriter, r *http.Request, _ []byte) {
	name := r.PathValue("file")
	b, err := fs.ReadFile(staticFS, "static/"+name)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "No such file.")
		return
	}
	switch {
	case len(name) > 3 && name[len(name)-3:] == ".js":
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case len(name) > 4 && name[len(name)-4:] == ".css":
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	w.Header().Set("Cache-Control", "private, max-age=300")
	_, _ = w.Write(b)
}

type loginData struct {
	Next  string
	Error string
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request, _ []byte) {
	s.render(w, r, http.StatusOK, "login", page{Title: "Log in", Data: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request, _ []byte) {
	if !sameOrigin(r) {
		s.fail(w, r, http.StatusForbidden, "Cross-site request refused.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, "Unreadable form: "+err.Error())
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if !s.keys.tokenOK(r.PostFormValue("token")) {
		s.log.Warn("console login refused", zap.String("remote", r.RemoteAddr))
		s.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in", Data: loginData{Next: next, Error: "Wrong token."}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.keys.newSession(s.now()), Path: Prefix,
		MaxAge: int(SessionTTL / time.Second), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ []byte) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}
