// Package websim serves a generated web that looks like the one a crawler
// meets, for the benchmark and the end-to-end tests: many hosts on loopback
// addresses (one real HTTP server; each host answers at an address of its
// own), article pages of 10–30 KB with
// 20–60 links spelled every way the web spells them, paginated list pages
// with query strings, same-host redirect chains into pages already linked,
// 404s, a 500, a slow page, a few 5 MB pages, binaries, a calendar-style
// trap, GBK-encoded pages, a robots.txt Disallow, and links to a host that
// is not part of the crawl.
//
// The site counts what it receives by resource (host, path with dot
// segments resolved and escapes decoded, non-empty query), so it can say how
// many requests fetched something already fetched, how many went outside the
// crawl's hosts or under a Disallow, and how much of the site was covered.
//
// Every host serves:
//
//	/robots.txt                 disallows /private/
//	/                           index: the first list page, a few articles
//	/list?page=<k>              ten articles each, previous and next page
//	/news/<year>/story-<i>.html articles (10–30 KB; every 10th host in GBK)
//	/r/<k> → /r/<k>/hop → story a two-hop redirect chain into a linked article
//	/gone/<k>                   404
//	/error                      500, always (retries are counted apart)
//	/files/report-<k>.pdf       a binary (application/pdf)
//	/private/<k>                linked, disallowed by robots.txt
//	/cal/<y>/<m>                calendar trap: every month links the previous and the next
//	                            (with TrapGrid also the same month a year before and after;
//	                            some hosts)
//	/slow                       answers after Config.SlowDelay (some hosts)
//	/big                        a 5 MiB page (some hosts)
//
// Article links come in these spellings (every one resolves to the same
// story): absolute, upper-case scheme, scheme-relative, root-relative,
// relative, "./", dot segments, empty query, fragment, escaped unreserved
// characters, a ;jsessionid path parameter, and absolute links to other
// hosts and to the off-site host.
//
// With Config.ScriptShare a share of the hosts are script-built
// (script.go): every HTML page an empty shell whose /app.js writes the
// page's text and links, fetched from /data/<page>.json, into the DOM, as
// sites built with React or Vue without server rendering serve them;
// Web.ScriptBuilt says which.
//
// With Config.BestDeep the hosts serve another shape instead (deep.go):
// sites whose most linked pages sit deepest, for measuring what a crawl
// stopped by a page budget holds of them (MostLinked, Stats.MostLinked).
// With Config.Shop they serve shops (shop.go): product pages whose
// extracted fields and structured data are known in advance (ShopProduct,
// Tally), with manuals in PDF and spec sheets in docx.
package websim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes the generated web.
type Config struct {
	Hosts        int        // hosts of the crawl (default 200)
	Articles     int        // articles per host (default 50)
	PerList      int        // articles per list page (default 10)
	FirstAddr    netip.Addr // hosts are consecutive addresses from here (default 127.1.0.1)
	Seed         uint64     // graph and text seed
	MinPageBytes int        // article size range (default 10 KiB to 30 KiB)
	MaxPageBytes int
	MinLinks     int // links per article (default 20 to 60)
	MaxLinks     int
	// Every n-th host (n > 0) has the feature; 0 takes the default, a
	// negative value turns it off.
	GBKEvery  int // articles in GBK, charset in the header or in a meta tag (default 10)
	TrapEvery int // a calendar trap linked from its articles (default 25)
	BigEvery  int // /big, a BigBytes page, linked (default 50)
	SlowEvery int // /slow linked (default 40)

	// TrapGrid makes every calendar month also link the same month of
	// the previous and the next year, as calendars with year navigation
	// do. The months within k links of the entry then grow with the
	// square of k for the first six links (2k²+2k+1 of them), then by 24
	// a link instead of the line's 2, since twelve month steps reach
	// what one year step does: 253 months within 13 links instead of 27.
	TrapGrid bool

	// BestDeep serves, instead of the articles, lists and the rest, sites
	// whose most linked pages sit deepest (deep.go): a home, 28 sections,
	// 448 ordinary pages below them and 53 popular pages, a tenth of the
	// site, linked only from the ordinary pages and each other. Articles,
	// PerList and the every-n-th features do not apply; robots.txt and
	// the off-site host do.
	BestDeep bool

	// Shop serves, instead of the articles, shops (shop.go): a home,
	// category lists and Articles product pages a host whose values and
	// structured data are known in advance (ShopProduct), some with a
	// manual (PDF) and a spec sheet (docx). The every-n-th features do
	// not apply; robots.txt and the off-site host do.
	Shop bool

	BigBytes  int           // default 5 MiB
	SlowDelay time.Duration // default 2s

	// Private lets the hosts' addresses be private IPv4 addresses
	// (10/8, 172.16/12, 192.168/16) instead of loopback ones: the web
	// host of the multi-host harness (deployments/local/multihost) serves
	// them in a network namespace of its own, reached over a bridge.
	Private bool

	// ScriptShare is the share of the hosts, 0 to 1, whose pages are
	// built in the browser (script.go): each HTML page an empty shell
	// whose script fetches the page's text and links from
	// /data/<page>.json. Which hosts is drawn from Seed (Web.ScriptBuilt).
	// The article shape only.
	ScriptShare float64

	// Port is the port every host listens on; 0 takes a free one at
	// start. A host's URLs go to the fetch partition of its host:port,
	// so two runs on different ports share partitions out differently:
	// a benchmark compared back to back fixes it.
	Port int
}

// Defaults of Config.
const (
	DefaultHosts        = 200
	DefaultArticles     = 50
	DefaultPerList      = 10
	DefaultMinPageBytes = 10 << 10
	DefaultMaxPageBytes = 30 << 10
	DefaultMinLinks     = 20
	DefaultMaxLinks     = 60
	DefaultGBKEvery     = 10
	DefaultTrapEvery    = 25
	DefaultBigEvery     = 50
	DefaultSlowEvery    = 40
	DefaultBigBytes     = 5 << 20
	DefaultSlowDelay    = 2 * time.Second
)

// DefaultFirstAddr is the address of host 0.
var DefaultFirstAddr = netip.MustParseAddr("127.1.0.1")

func (c *Config) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Hosts, DefaultHosts)
	def(&c.Articles, DefaultArticles)
	def(&c.PerList, DefaultPerList)
	def(&c.MinPageBytes, DefaultMinPageBytes)
	def(&c.MaxPageBytes, DefaultMaxPageBytes)
	def(&c.MinLinks, DefaultMinLinks)
	def(&c.MaxLinks, DefaultMaxLinks)
	def(&c.GBKEvery, DefaultGBKEvery)
	def(&c.TrapEvery, DefaultTrapEvery)
	def(&c.BigEvery, DefaultBigEvery)
	def(&c.SlowEvery, DefaultSlowEvery)
	def(&c.BigBytes, DefaultBigBytes)
	if c.SlowDelay == 0 {
		c.SlowDelay = DefaultSlowDelay
	}
	if !c.FirstAddr.IsValid() {
		c.FirstAddr = DefaultFirstAddr
	}
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	var errs []error
	if c.Hosts < 1 {
		errs = append(errs, fmt.Errorf("hosts: %d, want at least 1", c.Hosts))
	}
	if c.Articles < 1 || c.PerList < 1 {
		errs = append(errs, fmt.Errorf("articles %d and per-list %d: want at least 1", c.Articles, c.PerList))
	}
	if c.MinPageBytes < 1024 || c.MaxPageBytes < c.MinPageBytes {
		errs = append(errs, fmt.Errorf("page bytes %d..%d: want 1024 <= min <= max", c.MinPageBytes, c.MaxPageBytes))
	}
	if c.MinLinks < 1 || c.MaxLinks < c.MinLinks {
		errs = append(errs, fmt.Errorf("links %d..%d: want 1 <= min <= max", c.MinLinks, c.MaxLinks))
	}
	if c.Port < 0 || c.Port > 65535 {
		errs = append(errs, fmt.Errorf("port %d: want 0 (any free port) to 65535", c.Port))
	}
	switch {
	case c.Private:
		if last := addrAt(c.FirstAddr, c.Hosts); !c.FirstAddr.Is4() || !c.FirstAddr.IsPrivate() || !last.IsValid() || !last.IsPrivate() {
			errs = append(errs, fmt.Errorf("first address %s: %d hosts and the off-site host must be private IPv4 addresses", c.FirstAddr, c.Hosts))
		}
	case !c.FirstAddr.Is4() || !c.FirstAddr.IsLoopback():
		errs = append(errs, fmt.Errorf("first address %s: want an IPv4 loopback address", c.FirstAddr))
	default:
		if last := addrAt(c.FirstAddr, c.Hosts); !last.IsValid() || !last.IsLoopback() {
			errs = append(errs, fmt.Errorf("first address %s: %d hosts and the off-site host leave 127.0.0.0/8", c.FirstAddr, c.Hosts))
		}
	}
	if c.Shop && c.BestDeep {
		errs = append(errs, errors.New("shop and best-deep: serve one shape"))
	}
	if c.Shop && c.Articles < shopCategories {
		errs = append(errs, fmt.Errorf("articles %d: a shop wants at least %d products, one a category", c.Articles, shopCategories))
	}
	if !(c.ScriptShare >= 0 && c.ScriptShare <= 1) {
		errs = append(errs, fmt.Errorf("script share %v: want 0 to 1", c.ScriptShare))
	}
	if c.ScriptShare > 0 && (c.Shop || c.BestDeep) {
		errs = append(errs, errors.New("script share: script-built sites are of the article shape, not shops or best-deep sites"))
	}
	if c.BigBytes < 0 || c.SlowDelay < 0 {
		errs = append(errs, errors.New("big bytes and slow delay must not be negative"))
	}
	return errors.Join(errs...)
}

// addrAt returns the i-th address after a (invalid when it overflows).
func addrAt(a netip.Addr, i int) netip.Addr {
	for range i {
		a = a.Next()
		if !a.IsValid() {
			return a
		}
	}
	return a
}

// has reports whether host h has a feature present on every n-th host.
func has(every, h int) bool { return every > 0 && h%every == every-1 }

// Web is a running generated web. Safe for concurrent use.
type Web struct {
	cfg     Config
	port    int
	addrs   []string // host:port of every crawl host, then the off-site host
	lns     []net.Listener
	srv     *http.Server
	wg      sync.WaitGroup
	started time.Time
	stats   *stats
	// With BestDeep: each host's links from ordinary to popular pages
	// (deepAssign), and the most linked tenth of the pages (mostLinked).
	deep [][]uint8
	top  []bool
	// script marks the script-built hosts (nil: none).
	script []bool
	conns  atomic.Int64 // connections accepted
	// inflight counts the requests being answered: a client can read
	// a whole answer before its handler has recorded it in the stats.
	inflight atomic.Int64
}

// Start generates the web and serves every host, plus the off-site host, on
// its own loopback address; all hosts share one port (and one listener).
// Close stops it.
func Start(ctx context.Context, cfg Config) (*Web, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("websim: %w", err)
	}
	w := &Web{cfg: cfg, started: time.Now()}
	if err := w.listen(ctx); err != nil {
		return nil, err
	}
	if cfg.BestDeep {
		w.deep = make([][]uint8, cfg.Hosts)
		for h := range w.deep {
			w.deep[h] = w.deepAssign(h)
		}
		w.top = w.mostLinked()
	}
	w.script = scriptHosts(cfg)
	w.stats = newStats(cfg.Hosts)
	for _, in := range w.top {
		if in {
			w.stats.s.MostLinkedTotal++
		}
	}
	w.srv = &http.Server{
		Handler:           http.HandlerFunc(w.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext:       hostContext(w.hostOf),
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				w.conns.Add(1)
			}
		},
	}
	for _, ln := range w.lns {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			_ = w.srv.Serve(ln) // http.ErrServerClosed after Close
		}()
	}
	return w, nil
}

// listen binds one port on every address of the wildcard: a listener per
// host would take a file per host, and 20 000 hosts exceed the usual
// open-files limit. A connection is answered as the host whose address
// it reached (hostOf); one to an address outside the web (a non-loopback
// interface included) is closed at once.
func (w *Web) listen(ctx context.Context) error {
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", net.JoinHostPort("0.0.0.0", strconv.Itoa(w.cfg.Port)))
	if err != nil {
		return fmt.Errorf("websim: listen: %w", err)
	}
	w.port = ln.Addr().(*net.TCPAddr).Port
	w.lns = []net.Listener{webListener{Listener: ln, hostOf: w.hostOf}}
	a := w.cfg.FirstAddr
	for range w.cfg.Hosts + 1 {
		w.addrs = append(w.addrs, netip.AddrPortFrom(a, uint16(w.port)).String())
		a = a.Next()
	}
	return nil
}

// webListener accepts only the connections made to one of the web's
// addresses.
type webListener struct {
	net.Listener
	hostOf func(net.Addr) int
}

func (l webListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || l.hostOf(c.LocalAddr()) >= 0 {
			return c, err
		}
		c.Close()
	}
}

// Close stops the servers (aborting slow answers) and waits for them.
func (w *Web) Close() error {
	err := w.srv.Close()
	w.wg.Wait()
	return err
}

// Config returns the configuration with its defaults.
func (w *Web) Config() Config { return w.cfg }

// Hosts returns host:port of every host of the crawl.
func (w *Web) Hosts() []string { return append([]string(nil), w.addrs[:w.cfg.Hosts]...) }

// Offsite returns host:port of the host the pages link to that is not part
// of the crawl: a crawl scoped to Hosts must never request it.
func (w *Web) Offsite() string { return w.addrs[w.cfg.Hosts] }

// Seeds returns the index URL of every host.
func (w *Web) Seeds() []string {
	out := make([]string, w.cfg.Hosts)
	for h := range out {
		out[h] = "http://" + w.addrs[h] + "/"
	}
	return out
}

// Ready is what cmd/websim prints, as one JSON line, once it serves.
type Ready struct {
	Seeds   []string `json:"seeds"`
	Hosts   []string `json:"hosts"`
	Offsite string   `json:"offsite"`
	Pages   int      `json:"pages"`
	Stats   string   `json:"stats"` // URL of GET /stats (Stats as JSON)
	// ScriptBuilt lists host:port of the script-built hosts
	// (Config.ScriptShare).
	ScriptBuilt []string `json:"script_built,omitempty"`
}

// TrapHosts returns the number of hosts that serve a calendar trap.
func (w *Web) TrapHosts() int {
	n := 0
	if w.cfg.BestDeep || w.cfg.Shop {
		return 0
	}
	for h := range w.cfg.Hosts {
		if has(w.cfg.TrapEvery, h) {
			n++
		}
	}
	return n
}

// Pages returns the number of distinct pages a complete crawl fetches that
// are the site's content: every index, list page and article.
func (w *Web) Pages() int {
	if w.cfg.BestDeep {
		return w.cfg.Hosts * deepPages
	}
	if w.cfg.Shop {
		return w.cfg.Hosts * w.shopPages()
	}
	return w.cfg.Hosts * (1 + w.lists() + w.cfg.Articles)
}

func (w *Web) lists() int { return (w.cfg.Articles + w.cfg.PerList - 1) / w.cfg.PerList }

// rng returns the deterministic generator of one page.
func (w *Web) rng(h int, what, i uint64) *rand.Rand {
	return rand.New(rand.NewPCG(w.cfg.Seed^uint64(h)<<32^what<<56, i))
}
