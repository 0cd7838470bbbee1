package demosite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config describes the generated site.
type Config struct {
	Hosts          int           // number of hosts (default 5)
	PagesPerHost   int           // generated pages per host (default 50)
	FirstHostPages int           // generated pages of host 0 when > 0 (a skewed site); 0 = PagesPerHost
	FirstHostOctet int           // hosts are 127.0.0.<FirstHostOctet+i> (default 10)
	Seed           uint64        // link graph seed
	LinkBig        bool          // link /big.html from the pages
	BigBytes       int           // size of /big.html (default 4 MiB)
	LinkSlow       bool          // link /slow.html from the pages
	SlowDelay      time.Duration // how long /slow.html sleeps before answering (default 5s)
	// ScriptHosts makes the last ScriptHosts hosts script-built: their
	// HTML pages are a shell (an empty app root, a script, a noscript
	// asking for JavaScript) whose script fetches the page's text and
	// links from /_data/<path>.json and writes them into the DOM, as
	// sites built with React or Vue do. A crawler that does not render
	// finds only their index; one that renders finds what it finds on the
	// other hosts (ReachableAllowed is the same).
	ScriptHosts int
}

// Defaults of Config.
const (
	DefaultHosts          = 5
	DefaultPagesPerHost   = 50
	DefaultFirstHostOctet = 10
	DefaultBigBytes       = 4 << 20
	DefaultSlowDelay      = 5 * time.Second
)

func (c *Config) setDefaults() {
	if c.Hosts == 0 {
		c.Hosts = DefaultHosts
	}
	if c.PagesPerHost == 0 {
		c.PagesPerHost = DefaultPagesPerHost
	}
	if c.FirstHostOctet == 0 {
		c.FirstHostOctet = DefaultFirstHostOctet
	}
	if c.BigBytes == 0 {
		c.BigBytes = DefaultBigBytes
	}
	if c.SlowDelay == 0 {
		c.SlowDelay = DefaultSlowDelay
	}
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case c.Hosts < 1:
		return errors.New("demo site: at least one host required")
	case c.PagesPerHost < 1:
		return errors.New("demo site: at least one page per host required")
	case c.FirstHostOctet < 1 || c.FirstHostOctet+c.Hosts > 255:
		return fmt.Errorf("demo site: hosts 127.0.0.%d..%d out of range", c.FirstHostOctet, c.FirstHostOctet+c.Hosts-1)
	case c.BigBytes < 0 || c.SlowDelay < 0 || c.FirstHostPages < 0:
		return errors.New("demo site: negative size or delay")
	case c.ScriptHosts < 0 || c.ScriptHosts > c.Hosts:
		return fmt.Errorf("demo site: %d script-built hosts of %d", c.ScriptHosts, c.Hosts)
	}
	return nil
}

// Request is one request the site received.
type Request struct {
	Host   string // host:port the request was addressed to (the listener's address)
	Path   string // request URI (path and query)
	Method string
	Time   time.Time
	// UserAgent and From are the request's User-Agent and From headers:
	// a crawl's identity.
	UserAgent, From string
}

// URL returns the absolute URL of the request.
func (r Request) URL() string { return "http://" + r.Host + r.Path }

// IsRobots reports whether the request fetched robots.txt.
func (r Request) IsRobots() bool { return r.Path == PathRobots }

// Site is the running demo site. Safe for concurrent use.
type Site struct {
	cfg     Config
	g       *graph
	addrs   []string // host:port of each host
	servers []*http.Server
	wg      sync.WaitGroup

	mu       sync.Mutex
	requests []Request
}

// Start generates the site and serves every host on its own loopback
// address (127.0.0.x) and a free port. Close stops it.
func Start(ctx context.Context, cfg Config) (*Site, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Site{cfg: cfg, g: newGraph(cfg)}
	var lns []net.Listener
	for h := range cfg.Hosts {
		ip := fmt.Sprintf("127.0.0.%d", cfg.FirstHostOctet+h)
		ln, err := new(net.ListenConfig).Listen(ctx, "tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", ip, err)
		}
		lns = append(lns, ln)
		s.addrs = append(s.addrs, ln.Addr().String())
	}
	for h, ln := range lns {
		srv := &http.Server{
			Handler:           s.handler(h),
			ReadHeaderTimeout: 10 * time.Second,
		}
		s.servers = append(s.servers, srv)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = srv.Serve(ln) // returns http.ErrServerClosed after Close
		}()
	}
	return s, nil
}

// Close stops every host's server, aborting slow requests, and waits.
func (s *Site) Close() error {
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.Close())
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// Config returns the configuration with defaults applied.
func (s *Site) Config() Config { return s.cfg }

// Hosts returns the host:port of every host.
func (s *Site) Hosts() []string { return slices.Clone(s.addrs) }

// URL returns the absolute URL of path on host h.
func (s *Site) URL(h int, path string) string { return "http://" + s.addrs[h] + path }

// Seeds returns the index URL of every host.
func (s *Site) Seeds() []string {
	out := make([]string, len(s.addrs))
	for h := range s.addrs {
		out[h] = s.URL(h, PathIndex)
	}
	return out
}

// Requests returns a copy of the request log in arrival order.
func (s *Site) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// reachable walks the link graph breadth-first from every host's index and
// calls visit for every node a correct crawler discovers, disallowed ones
// included; disallowed nodes are not expanded.
func (s *Site) reachable(visit func(nd *node, allowed bool)) {
	seen := make(map[ref]bool)
	var queue []ref
	for h := range s.cfg.Hosts {
		r := ref{h, PathIndex}
		seen[r] = true
		queue = append(queue, r)
	}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		nd := s.g.nodes[r.host][r.path]
		allowed := !strings.HasPrefix(r.path, DisallowedPrefix)
		visit(nd, allowed)
		if !allowed {
			continue
		}
		for _, next := range s.g.successors(nd) {
			if !seen[next] {
				seen[next] = true
				queue = append(queue, next)
			}
		}
	}
}

// ReachableAllowed returns, sorted, the URLs a correct crawler seeded with
// Seeds must fetch: reachable through links and redirects, allowed by
// robots.txt. Error pages, redirects and non-HTML resources are included;
// robots.txt itself is not.
func (s *Site) ReachableAllowed() []string {
	var out []string
	s.reachable(func(nd *node, allowed bool) {
		if allowed {
			out = append(out, s.URL(nd.host, nd.path))
		}
	})
	slices.Sort(out)
	return out
}

// Disallowed returns, sorted, the reachable URLs that robots.txt disallows:
// a crawler discovers them but must not request them.
func (s *Site) Disallowed() []string {
	var out []string
	s.reachable(func(nd *node, allowed bool) {
		if !allowed {
			out = append(out, s.URL(nd.host, nd.path))
		}
	})
	slices.Sort(out)
	return out
}

// HTMLPages returns, sorted, the reachable allowed URLs that answer 200 with
// an HTML page of ordinary size: the ones that must yield a document.
func (s *Site) HTMLPages() []string {
	var out []string
	s.reachable(func(nd *node, allowed bool) {
		if allowed && nd.kind == kindHTML {
			out = append(out, s.URL(nd.host, nd.path))
		}
	})
	slices.Sort(out)
	return out
}

// IsDisallowed reports whether a request path falls under robots.txt's
// Disallow rule.
func IsDisallowed(path string) bool { return strings.HasPrefix(path, DisallowedPrefix) }

func (s *Site) handler(h int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, Request{Host: s.addrs[h], Path: r.URL.RequestURI(), Method: r.Method, Time: time.Now(),
			UserAgent: r.UserAgent(), From: r.Header.Get("From")})
		s.mu.Unlock()
		s.serve(h, w, r)
	})
}

// ScriptBuilt reports whether host h builds its pages with a script
// (Config.ScriptHosts).
func (s *Site) ScriptBuilt(h int) bool { return h >= s.cfg.Hosts-s.cfg.ScriptHosts }

// The paths of a script-built host's script and of a page's data.
const (
	PathAppScript = "/_app.js"
	DataPrefix    = "/_data"
)

func (s *Site) serve(h int, w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == PathRobots {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "User-agent: *\nDisallow: %s\n", DisallowedPrefix)
		return
	}
	if s.ScriptBuilt(h) && s.serveScripted(h, w, r) {
		return
	}
	nd, ok := s.g.nodes[h][r.URL.Path]
	if !ok || r.URL.RawQuery != "" {
		http.NotFound(w, r)
		return
	}
	switch nd.kind {
	case kindMissing:
		http.NotFound(w, r)
	case kindRedirect:
		th, tp := s.g.redirectTarget(h)
		http.Redirect(w, r, s.URL(th, tp), http.StatusMovedPermanently)
	case kindData:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, "{\"host\": %d, \"items\": [1, 2, 3]}\n", h)
	case kindBig:
		s.serveBig(w)
	case kindSlow:
		t := time.NewTimer(s.cfg.SlowDelay)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><html><head><title>slow</title></head><body><p>finally</p></body></html>")
	default:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if s.ScriptBuilt(h) {
			_, _ = w.Write(shell(nd))
			return
		}
		_, _ = w.Write(s.render(nd))
	}
}

// appScript builds a script-built host's page: it fetches the page's
// data and writes its title, text and links into the app root.
const appScript = `(async () => {
  const app = document.getElementById("app");
  const path = location.pathname === "/" ? "/index" : location.pathname;
  const d = await (await fetch("` + DataPrefix + `" + path + ".json")).json();
  document.title = d.title;
  const h = document.createElement("h1"); h.textContent = d.title; app.append(h);
  for (const t of d.paragraphs) { const p = document.createElement("p"); p.textContent = t; app.append(p); }
  const ul = document.createElement("ul");
  for (const l of d.links) {
    const li = document.createElement("li"), a = document.createElement("a");
    a.href = l.href; a.textContent = l.text; li.append(a); ul.append(li);
  }
  app.append(ul);
})();
`

// serveScripted answers a script-built host's script and data; false
// for any other path.
func (s *Site) serveScripted(h int, w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.URL.Path == PathAppScript:
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		w.Header().Set("Cache-Control", "public, max-age=3600") // as a site's bundles: asked for once
		_, _ = io.WriteString(w, appScript)
		return true
	case strings.HasPrefix(r.URL.Path, DataPrefix+"/") && strings.HasSuffix(r.URL.Path, ".json"):
		path := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, DataPrefix), ".json")
		if path == "/index" {
			path = PathIndex
		}
		nd, ok := s.g.nodes[h][path]
		if !ok || nd.kind != kindHTML {
			http.NotFound(w, r)
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.pageData(nd))
		return true
	}
	return false
}

// pageData is a page's title, text and links: what render writes into an
// ordinary page, and what a script-built page's script writes.
type pageData struct {
	Title      string     `json:"title"`
	Paragraphs []string   `json:"paragraphs"`
	Links      []linkData `json:"links"`
}

type linkData struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

func (s *Site) pageData(nd *node) pageData {
	d := pageData{Title: nd.title}
	seed := len(nd.path) + nd.host*7
	for p := range 3 {
		var b strings.Builder
		for i := range 24 {
			b.WriteString(words[(seed*31+p*17+i*13+i*i)%len(words)])
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "(%s on host %d)", nd.path, nd.host)
		d.Paragraphs = append(d.Paragraphs, b.String())
	}
	for i, l := range nd.links {
		href := l.href
		if l.abs {
			href = s.URL(l.host, l.path)
		}
		d.Links = append(d.Links, linkData{Href: href, Text: fmt.Sprintf("link %d to %s", i, l.path)})
	}
	return d
}

// shell is a script-built page as served: no text, no links, an app root
// and the script that fills it.
func shell(nd *node) []byte {
	var b bytes.Buffer
	writeHead(&b, nd)
	b.WriteString("<script defer src=\"" + PathAppScript + "\"></script></head>\n<body>\n<div id=\"app\"></div>\n")
	b.WriteString("<noscript>This page needs JavaScript.</noscript>\n</body></html>\n")
	return b.Bytes()
}

func (s *Site) serveBig(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", fmt.Sprint(s.cfg.BigBytes))
	head := "<!doctype html><html><head><title>big</title></head><body><p>"
	tail := "</p></body></html>"
	chunk := bytes.Repeat([]byte("lorem ipsum "), 4096)
	rest := s.cfg.BigBytes - len(head) - len(tail)
	if rest < 0 {
		rest = 0
	}
	if _, err := w.Write([]byte(head)); err != nil {
		return
	}
	for rest > 0 {
		n := min(rest, len(chunk))
		if _, err := w.Write(chunk[:n]); err != nil {
			return // the client stopped reading (body limit): expected
		}
		rest -= n
	}
	_, _ = w.Write([]byte(tail))
}

var words = strings.Fields("crawler fetch parse frontier politeness robots host partition queue broker " +
	"document fingerprint shingle anchor title body link redirect status delay budget depth " +
	"schedule offset commit replica segment index merge token query answer")

// render writes the HTML of a page.
func (s *Site) render(nd *node) []byte {
	var b bytes.Buffer
	writeHead(&b, nd)
	b.WriteString("</head>\n<body>\n")
	d := s.pageData(nd)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(d.Title))
	for _, p := range d.Paragraphs {
		fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(p))
	}
	b.WriteString("<ul>\n")
	for _, l := range d.Links {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(l.Href), html.EscapeString(l.Text))
	}
	b.WriteString("</ul>\n</body></html>\n")
	return b.Bytes()
}

// writeHead writes a page's doctype, head and title, and its <base> when
// it has one; the head is left open.
func writeHead(b *bytes.Buffer, nd *node) {
	b.WriteString("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
	fmt.Fprintf(b, "<title>%s</title>", html.EscapeString(nd.title))
	if nd.path == PathBase {
		b.WriteString(`<base href="/based/">`)
	}
}

// WaitIdle waits until no request arrived for quiet, or ctx is done.
func (s *Site) WaitIdle(ctx context.Context, quiet time.Duration) error {
	t := time.NewTicker(quiet / 4)
	defer t.Stop()
	for {
		s.mu.Lock()
		var last time.Time
		if n := len(s.requests); n > 0 {
			last = s.requests[n-1].Time
		}
		s.mu.Unlock()
		if time.Since(last) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for idle site: %w", ctx.Err())
		case <-t.C:
		}
	}
}
