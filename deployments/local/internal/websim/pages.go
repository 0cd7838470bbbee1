package websim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// Kinds of resources (Stats.ByKind).
const (
	KindRobots   = "robots"
	KindIndex    = "index"
	KindList     = "list"
	KindArticle  = "article"
	KindRedirect = "redirect"
	KindMissing  = "missing"
	KindError    = "error"
	KindBinary   = "binary"
	KindPrivate  = "private"
	KindTrap     = "trap"
	KindSlow     = "slow"
	KindBig      = "big"
	KindOffsite  = "offsite"
	KindUnknown  = "unknown"
)

// Seeds for Web.rng, one per kind of generated content.
const (
	rngArticle uint64 = iota + 1
	rngBinary
)

type hostKey struct{}

// hostContext stores the index of the host a connection was accepted on.
func hostContext(hostOf func(net.Addr) int) func(ctx context.Context, c net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, hostKey{}, hostOf(c.LocalAddr()))
	}
}

// hostOf maps a listener address to its host index (Hosts() order; the
// off-site host is cfg.Hosts).
func (w *Web) hostOf(a net.Addr) int {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return -1
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return -1
	}
	d := int(u32(ip.Unmap())) - int(u32(w.cfg.FirstAddr))
	if d < 0 || d > w.cfg.Hosts {
		return -1
	}
	return d
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// statusWriter remembers the status, counts the body bytes and stamps
// the start of the last write: the answer's last bytes left after it.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	last   time.Time
}

func (s *statusWriter) WriteHeader(code int) {
	s.last = time.Now()
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	s.last = time.Now()
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(p)
	s.bytes += int64(n)
	return n, err
}

func (w *Web) serveHTTP(rw http.ResponseWriter, r *http.Request) {
	w.inflight.Add(1)
	defer w.inflight.Add(-1)
	arrived := time.Now()
	h, _ := r.Context().Value(hostKey{}).(int)
	sw := &statusWriter{ResponseWriter: rw}
	kind := w.serve(h, sw, r)
	if sw.status == 0 && r.Context().Err() == nil {
		sw.status = http.StatusOK
	}
	at := time.Now()
	sent := sw.last
	if sent.IsZero() {
		// nothing written: the header goes out after the handler returns
		sent = at
	}
	deep := kind == KindTrap && w.deepInTrap(r)
	w.stats.record(h, resourceOf(r), kind, deep, w.isMostLinked(h, r), Hit{At: at, Arrived: arrived, Sent: sent, Status: sw.status}, sw.bytes)
}

// isMostLinked reports whether r asked for one of the most linked pages
// of a best-deep web.
func (w *Web) isMostLinked(h int, r *http.Request) bool {
	if w.top == nil || h < 0 || h >= w.cfg.Hosts {
		return false
	}
	n, ok := deepNode(path.Clean("/" + stripPathParams(r.URL.Path)))
	return ok && w.top[h*deepPages+n]
}

// deepInTrap reports whether r, answered as a calendar page, asked for a
// month past the trap's second hop.
func (w *Web) deepInTrap(r *http.Request) bool {
	c, ok := parseMonth(strings.TrimPrefix(stripPathParams(r.URL.Path), "/cal/"))
	return ok && pastSecondHop(c, w.cfg.TrapGrid)
}

// serve answers one request and returns the kind of resource asked for.
func (w *Web) serve(h int, rw http.ResponseWriter, r *http.Request) string {
	p := stripPathParams(r.URL.Path)
	if h < 0 {
		http.NotFound(rw, r)
		return KindUnknown
	}
	if h == w.cfg.Hosts {
		writeHTML(rw, "", []byte("<!doctype html><title>elsewhere</title><p>not part of the crawl</p>"))
		return KindOffsite
	}
	if w.ScriptBuilt(h) {
		if kind, ok := w.serveScriptBuilt(h, rw, r, p); ok {
			return kind
		}
	}
	switch {
	case p == "/robots.txt":
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(rw, "User-agent: *\nDisallow: /private/\n")
		return KindRobots
	case w.cfg.BestDeep:
		return w.serveDeep(h, rw, r, p)
	case w.cfg.Shop:
		return w.serveShop(h, rw, r, p)
	case p == "/":
		writeHTML(rw, "", w.index(h))
		return KindIndex
	case p == "/list":
		k, err := strconv.Atoi(r.URL.Query().Get("page"))
		if err != nil || k < 1 || k > w.lists() {
			http.NotFound(rw, r)
			return KindMissing
		}
		writeHTML(rw, "", w.list(h, k))
		return KindList
	case strings.HasPrefix(p, "/news/"):
		i, ok := w.articleIndex(p)
		if !ok {
			http.NotFound(rw, r)
			return KindMissing
		}
		w.serveArticle(rw, h, i)
		return KindArticle
	case strings.HasPrefix(p, "/r/"):
		rest := strings.TrimPrefix(p, "/r/")
		if k, ok := strings.CutSuffix(rest, "/hop"); ok {
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 {
				http.NotFound(rw, r)
				return KindMissing
			}
			http.Redirect(rw, r, "http://"+w.addrs[h]+w.articlePath(i%w.cfg.Articles), http.StatusFound)
			return KindRedirect
		}
		http.Redirect(rw, r, "/r/"+rest+"/hop", http.StatusMovedPermanently)
		return KindRedirect
	case strings.HasPrefix(p, "/gone/"):
		http.NotFound(rw, r)
		return KindMissing
	case p == "/error":
		http.Error(rw, "internal error", http.StatusInternalServerError)
		return KindError
	case strings.HasPrefix(p, "/files/"):
		rw.Header().Set("Content-Type", "application/pdf")
		_, _ = rw.Write(w.binary(h, p))
		return KindBinary
	case strings.HasPrefix(p, "/private/"):
		writeHTML(rw, "", []byte("<!doctype html><title>private</title><p>robots.txt disallows this page</p>"))
		return KindPrivate
	case strings.HasPrefix(p, "/cal/") && has(w.cfg.TrapEvery, h):
		c, ok := parseMonth(strings.TrimPrefix(p, "/cal/"))
		if !ok {
			http.NotFound(rw, r)
			return KindMissing
		}
		writeHTML(rw, "", calendar(c, w.cfg.TrapGrid))
		return KindTrap
	case p == "/slow" && has(w.cfg.SlowEvery, h):
		t := time.NewTimer(w.cfg.SlowDelay)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return KindSlow
		case <-t.C:
		}
		writeHTML(rw, "", []byte("<!doctype html><title>slow</title><p>finally</p>"))
		return KindSlow
	case p == "/big" && has(w.cfg.BigEvery, h):
		w.serveBig(rw)
		return KindBig
	}
	http.NotFound(rw, r)
	return KindUnknown
}

// stripPathParams removes ";name=value" path parameters (a servlet
// container's ;jsessionid), which do not change the resource.
func stripPathParams(p string) string {
	if i := strings.IndexByte(p, ';'); i >= 0 {
		j := strings.IndexByte(p[i:], '/')
		if j < 0 {
			return p[:i]
		}
		return p[:i] + stripPathParams(p[i+j:])
	}
	return p
}

func writeHTML(rw http.ResponseWriter, charset string, body []byte) {
	ct := "text/html"
	if charset != "" {
		ct += "; charset=" + charset
	}
	rw.Header().Set("Content-Type", ct)
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = rw.Write(body)
}

func (w *Web) articlePath(i int) string {
	return fmt.Sprintf("/news/%d/story-%d.html", articleYear(i), i)
}

func articleYear(i int) int { return 2020 + i%6 }

// articleIndex parses /news/<year>/story-<i>.html.
func (w *Web) articleIndex(p string) (int, bool) {
	rest := strings.TrimPrefix(p, "/news/")
	year, name, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutPrefix(name, "story-")
	if !ok {
		return 0, false
	}
	num, ok = strings.CutSuffix(num, ".html")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || i >= w.cfg.Articles || strconv.Itoa(articleYear(i)) != year {
		return 0, false
	}
	return i, true
}

// month is a page of the calendar trap: /cal/<y>/<m>.
type month struct{ y, m int }

// trapEntry returns the month the articles of a trap host link to.
func trapEntry() month { return month{2026, 11} }

// path returns the path of month c's page.
func (c month) path() string { return fmt.Sprintf("/cal/%d/%d", c.y, c.m) }

// previous returns the month before c.
func (c month) previous() month {
	if c.m == 1 {
		return month{c.y - 1, 12}
	}
	return month{c.y, c.m - 1}
}

// next returns the month after c.
func (c month) next() month {
	if c.m == 12 {
		return month{c.y + 1, 1}
	}
	return month{c.y, c.m + 1}
}

// monthLink is a calendar page's link to another month.
type monthLink struct {
	to   month
	text string
}

// links returns the links of month c's page to other months: the
// previous and the next month, and on a grid calendar the same month of
// the previous and the next year too.
func (c month) links(grid bool) []monthLink {
	out := []monthLink{{c.previous(), "previous"}, {c.next(), "next"}}
	if grid {
		out = append(out, monthLink{month{c.y - 1, c.m}, "previous year"}, monthLink{month{c.y + 1, c.m}, "next year"})
	}
	return out
}

// pastSecondHop reports whether month c is more than one link away from
// the trap's entry. The entry (a crawl's first hop into the calendar)
// and the months it links to (the second hop) are what a person may
// want; every request of another month is the trap's waste.
func pastSecondHop(c month, grid bool) bool {
	if c == trapEntry() {
		return false
	}
	for _, l := range trapEntry().links(grid) {
		if l.to == c {
			return false
		}
	}
	return true
}

// parseMonth parses the "<y>/<m>" of a calendar page's path.
func parseMonth(s string) (month, bool) {
	ys, ms, ok := strings.Cut(s, "/")
	if !ok {
		return month{}, false
	}
	y, err1 := strconv.Atoi(ys)
	m, err2 := strconv.Atoi(ms)
	return month{y, m}, err1 == nil && err2 == nil && m >= 1 && m <= 12
}

// calendar returns the page of month c. It links other months, whose
// pages link theirs, forever: a line of months, or with grid a plane of
// months and years.
func calendar(c month, grid bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html><html><head><title>Events %d-%02d</title></head><body>"+
		"<h1>Events in %d-%02d</h1><p>No events this month.</p>", c.y, c.m, c.y, c.m)
	for _, l := range c.links(grid) {
		fmt.Fprintf(&b, "<a href=\"%s\">%s</a> ", l.to.path(), l.text)
	}
	b.WriteString("<a href=\"/\">home</a></body></html>")
	return b.Bytes()
}

func (w *Web) index(h int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Host %d front page</title></head>\n<body>\n", h)
	b.WriteString("<nav><a href=\"/list?page=1\">All stories</a> <a href=\"/private/0\">Members</a></nav>\n<ul>\n")
	for i := range min(5, w.cfg.Articles) {
		fmt.Fprintf(&b, "<li><a href=\"%s\">Story %d</a></li>\n", w.articlePath(i), i)
	}
	b.WriteString("</ul>\n</body></html>\n")
	return b.Bytes()
}

func (w *Web) list(h, k int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Stories, page %d</title></head>\n<body>\n<ol>\n", k)
	for i := (k - 1) * w.cfg.PerList; i < min(k*w.cfg.PerList, w.cfg.Articles); i++ {
		fmt.Fprintf(&b, "<li><a href=\"%s\">Story %d of host %d</a></li>\n", w.articlePath(i), i, h)
	}
	b.WriteString("</ol>\n<p>")
	if k > 1 {
		fmt.Fprintf(&b, "<a href=\"/list?page=%d\">previous</a> ", k-1)
	}
	if k < w.lists() {
		// A query-only relative reference: resolves against /list.
		fmt.Fprintf(&b, "<a href=\"?page=%d\">next</a>", k+1)
	}
	b.WriteString("</p>\n</body></html>\n")
	return b.Bytes()
}

func (w *Web) serveArticle(rw http.ResponseWriter, h, i int) {
	body := w.article(h, i)
	if !has(w.cfg.GBKEvery, h) {
		writeHTML(rw, "utf-8", body)
		return
	}
	gbk, err := simplifiedchinese.GBK.NewEncoder().Bytes(body)
	if err != nil {
		http.Error(rw, "encode gbk: "+err.Error(), http.StatusInternalServerError)
		return
	}
	if (h/w.cfg.GBKEvery)%2 == 0 {
		writeHTML(rw, "gbk", gbk) // declared in the header
		return
	}
	writeHTML(rw, "", gbk) // declared only in the meta tag
}

var words = strings.Fields("the crawler fetches pages from many hosts while the scheduler keeps a frontier " +
	"of urls and a seen set of fingerprints so that every resource is requested once politeness " +
	"means a delay between two requests to one host robots rules say what may be fetched the parser " +
	"extracts links titles and text and the analysts query statistics about status codes latency " +
	"bytes duplicates and documents found during the crawl of a large part of the web")

var hanzi = []rune("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处理府研质")

// TextShare is the share of an article's bytes that is visible text; the
// rest is markup, styles, scripts and structured data, as on the web's
// pages (their visible text is typically a fifth to a third of the HTML).
const TextShare = 0.35

// article generates the HTML of article i of host h: MinPageBytes to
// MaxPageBytes with MinLinks to MaxLinks links in the text, about
// TextShare of it visible text.
func (w *Web) article(h, i int) []byte {
	rng := w.rng(h, rngArticle, uint64(i))
	size := w.cfg.MinPageBytes + rng.IntN(w.cfg.MaxPageBytes-w.cfg.MinPageBytes+1)
	nlinks := w.cfg.MinLinks + rng.IntN(w.cfg.MaxLinks-w.cfg.MinLinks+1)
	gbk := has(w.cfg.GBKEvery, h)

	var b bytes.Buffer
	b.Grow(size + 4096)
	b.WriteString("<!doctype html>\n<html lang=\"")
	if gbk {
		b.WriteString("zh\"><head><meta charset=\"gbk\">")
	} else {
		b.WriteString("en\"><head><meta charset=\"utf-8\">")
	}
	title := w.sentence(rng, gbk, 6)
	fmt.Fprintf(&b, "<title>%s</title>\n<meta name=\"description\" content=\"%s\">\n", title, w.sentence(rng, gbk, 14))
	b.WriteString(headBoilerplate)
	fmt.Fprintf(&b, `<script type="application/ld+json">{"@context":"https://schema.org","@type":"NewsArticle","headline":"story %d","datePublished":"%d-03-01T08:00:00Z","author":{"@type":"Person","name":"staff"},"publisher":{"@type":"Organization","name":"host %d"}}</script>`+"\n", i, articleYear(i), h)
	b.WriteString("</head>\n<body class=\"page page--article\">\n<header class=\"site-header\"><div class=\"site-header__inner\">")
	b.WriteString(logoSVG)
	b.WriteString("<nav class=\"site-nav\" aria-label=\"main\"><ul class=\"site-nav__list\"><li class=\"site-nav__item\"><a class=\"site-nav__link\" href=\"/\">Home</a></li><li class=\"site-nav__item\"><a class=\"site-nav__link\" href=\"/list?page=1\">Stories</a></li><li class=\"site-nav__item\"><a class=\"site-nav__link\" href=\"/private/")
	b.WriteString(strconv.Itoa(i % private))
	b.WriteString("\">Members</a></li></ul></nav></div></header>\n<main class=\"layout\"><article class=\"article\">\n<h1 class=\"article__title\">")
	b.WriteString(title)
	b.WriteString("</h1>\n")
	w.blocks(&b, rng, gbk, size, nlinks, `<div class="article__block" data-block="%d"><p class="article__text">`, "article__link",
		func(link int) (string, string) { return w.link(rng, h, i, link) })
	writeTail(&b, size, h, ` &middot; <a href="#top">top</a>`)
	return b.Bytes()
}

// writeTail ends an article page of about size bytes: the sidebar's ad
// slots up to the size, the footer's boilerplate and the site's footer
// line (host h, then extra).
func writeTail(b *bytes.Buffer, size, h int, extra string) {
	b.WriteString("</article>\n<aside class=\"sidebar\">")
	for slot := 0; b.Len()+len(adSlot)+len(footerBoilerplate)+64 < size; slot++ {
		fmt.Fprintf(b, adSlot, 100+slot, 100+slot)
	}
	b.WriteString("</aside></main>\n")
	b.WriteString(footerBoilerplate)
	b.WriteString("<footer class=\"site-footer\"><p>&copy; 2026 host ")
	b.WriteString(strconv.Itoa(h))
	b.WriteString(extra)
	b.WriteString("</p></footer>\n</body></html>\n")
}

// Markup without text or links that the generated articles carry, like
// the web's pages: styles, analytics, an inline logo, ad slots, consent
// and player configuration.
const (
	headBoilerplate = `<meta name="viewport" content="width=device-width, initial-scale=1"><meta property="og:type" content="article"><meta name="twitter:card" content="summary_large_image">
<style>:root{--fg:#1a1a1a;--bg:#fff;--accent:#0b57d0;--muted:#5f6368}*,*::before,*::after{box-sizing:border-box}body{margin:0;font:16px/1.6 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
.site-header{position:sticky;top:0;z-index:10;background:var(--bg);border-bottom:1px solid #e0e0e0}.site-header__inner{display:flex;align-items:center;gap:1rem;max-width:72rem;margin:0 auto;padding:.5rem 1rem}
.site-nav__list{display:flex;gap:1.5rem;list-style:none;margin:0;padding:0}.site-nav__link{color:var(--fg);text-decoration:none;font-weight:600}.site-nav__link:hover{color:var(--accent)}
.layout{display:grid;grid-template-columns:minmax(0,1fr) 300px;gap:2rem;max-width:72rem;margin:0 auto;padding:1rem}@media (max-width:900px){.layout{grid-template-columns:1fr}.sidebar{display:none}}
.article__title{font-size:2.25rem;line-height:1.2;margin:.5rem 0 1rem}.article__text{margin:0 0 1.25rem}.article__link{color:var(--accent)}.ad-slot{min-height:250px;margin:1.5rem 0;background:#f5f5f5}</style>
<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push(arguments)}gtag("js",new Date());gtag("config","G-0000000000",{anonymize_ip:true,send_page_view:true});
(function(w,d){var s=d.createElement("script");s.async=true;s.src="data:text/javascript,";var f=d.getElementsByTagName("script")[0];f.parentNode.insertBefore(s,f);w.__consent={version:3,purposes:[1,2,3,4,7,9,10],vendors:[]}})(window,document);</script>
`
	logoSVG           = `<svg class="logo" width="120" height="28" viewBox="0 0 120 28" role="img" aria-hidden="true"><path d="M4 4h20v4H16v16h-4V8H4z" fill="currentColor"/><path d="M30 10c0-3.3 2.7-6 6-6h6v4h-6a2 2 0 0 0-2 2v14h-4z" fill="currentColor"/><circle cx="52" cy="16" r="8" fill="none" stroke="currentColor" stroke-width="3"/><path d="M66 4l6 20 6-20M84 4l6 20 6-20" fill="none" stroke="currentColor" stroke-width="3"/></svg>`
	adSlot            = `<div class="ad-slot" id="slot-%d" data-slot="%d" data-sizes="[[300,250],[336,280],[728,90]]" data-refresh="30" data-lazy="true"><script type="application/json" class="ad-config">{"network":"00000000","unit":"/news/article/inline","targeting":{"section":"news","pos":"inline","kw":["crawler","web","search"]},"collapseEmpty":true}</script></div>` + "\n"
	footerBoilerplate = `<div class="consent" hidden data-consent-version="3"><script type="application/json">{"purposes":[{"id":1,"required":true},{"id":2},{"id":3},{"id":4},{"id":7},{"id":9},{"id":10}],"legitimateInterest":[2,7,9,10],"ttlDays":180}</script></div>
<script>document.querySelectorAll(".ad-slot[data-lazy]").forEach(function(e){new IntersectionObserver(function(x,o){x.forEach(function(y){if(y.isIntersecting){e.dataset.loaded="1";o.disconnect()}})},{rootMargin:"200px"}).observe(e)});</script>
`
)

// blocks writes a page's running text: blocks of sentences, about
// TextShare of size in all, with nlinks links spread over them (each block
// takes an equal share of the text still to write, then the next link,
// link(j)), and an ad slot after every fourth block while the page is under
// size; markup fills the page up to its size. open is a block's opening
// markup (a format of its number), linkClass the links' class.
func (w *Web) blocks(b *bytes.Buffer, rng *rand.Rand, gbk bool, size, nlinks int, open, linkClass string, link func(j int) (href, anchor string)) {
	textBudget, text := int(float64(size)*TextShare), 0
	j := 0
	for block := 0; text < textBudget || j < nlinks; block++ {
		per := (textBudget - text) / (nlinks - j + 1)
		fmt.Fprintf(b, open, block)
		for n := text + per; text < n; {
			sentence := w.sentence(rng, gbk, 8+rng.IntN(12))
			b.WriteString(sentence)
			b.WriteString(". ")
			text += len(sentence) + 2
		}
		if j < nlinks {
			href, anchor := link(j)
			fmt.Fprintf(b, "See <a class=\"%s\" href=\"%s\">%s</a>.", linkClass, href, anchor)
			j++
		}
		b.WriteString("</p></div>\n")
		if block%4 == 3 && b.Len() < size {
			fmt.Fprintf(b, adSlot, block, block)
		}
	}
}

func (w *Web) sentence(rng *rand.Rand, gbk bool, n int) string {
	var s strings.Builder
	for j := range n {
		if gbk {
			s.WriteRune(hanzi[rng.IntN(len(hanzi))])
			continue
		}
		if j > 0 {
			s.WriteByte(' ')
		}
		s.WriteString(words[rng.IntN(len(words))])
	}
	return s.String()
}

// Distinct resources of each kind per host: the web's mix of requests is
// about three quarters content pages (as on the test web: 59
// distinct pages in 75 requests).
const (
	redirects = 5 // redirect chains, two requests each
	missing   = 3 // 404s
	binaries  = 3 // PDFs
	private   = 7 // disallowed pages
)

// link returns the href and text of link j of article i of host h.
func (w *Web) link(rng *rand.Rand, h, i, j int) (href, text string) {
	self := "http://" + w.addrs[h]
	roll := rng.IntN(100)
	switch {
	case roll < 55:
		k := rng.IntN(w.cfg.Articles)
		return w.spell(h, i, k, j), fmt.Sprintf("story %d", k)
	case roll < 67:
		oh := rng.IntN(w.cfg.Hosts)
		k := rng.IntN(w.cfg.Articles)
		return "http://" + w.addrs[oh] + w.articlePath(k), fmt.Sprintf("story %d on host %d", k, oh)
	case roll < 75:
		k := 1 + rng.IntN(w.lists())
		return fmt.Sprintf("/list?page=%d", k), "more stories"
	case roll < 77:
		return self + "/", "front page"
	case roll < 79:
		return "http://" + w.Offsite() + fmt.Sprintf("/ref/%d/%d", h, i), "elsewhere"
	case roll < 82:
		return fmt.Sprintf("/r/%d", rng.IntN(redirects)), "moved story"
	case roll < 84:
		return fmt.Sprintf("/gone/%d", rng.IntN(missing)), "old story"
	case roll < 85:
		return "/error", "broken page"
	case roll < 89:
		return fmt.Sprintf("/files/report-%d.pdf", rng.IntN(binaries)), "report"
	case roll < 92:
		return fmt.Sprintf("/private/%d", rng.IntN(private)), "members only"
	case roll < 95 && has(w.cfg.TrapEvery, h):
		return trapEntry().path(), "events"
	case roll < 96 && has(w.cfg.SlowEvery, h):
		return "/slow", "slow page"
	case roll < 97 && has(w.cfg.BigEvery, h):
		return "/big", "archive"
	default:
		k := rng.IntN(w.cfg.Articles)
		return w.spell(h, i, k, j), fmt.Sprintf("story %d", k)
	}
}

// spellings is the number of ways spell writes one link.
const spellings = 13

// spell writes a link from article i to article k of host h in spelling
// j mod spellings; every spelling resolves to the same resource.
func (w *Web) spell(h, i, k, j int) string {
	host := w.addrs[h]
	y, ky := articleYear(i), articleYear(k)
	name := fmt.Sprintf("story-%d.html", k)
	root := w.articlePath(k)
	switch j % spellings {
	case 0:
		return "http://" + host + root
	case 1:
		return "HTTP://" + host + root
	case 2:
		return "//" + host + root
	case 3:
		return root
	case 4:
		if y == ky {
			return name
		}
		return fmt.Sprintf("../%d/%s", ky, name)
	case 5:
		if y == ky {
			return "./" + name
		}
		return fmt.Sprintf("./../%d/%s", ky, name)
	case 6:
		return fmt.Sprintf("/news/archive/../%d/%s", ky, name)
	case 7:
		return root + "?"
	case 8:
		return root + "#comments"
	case 9:
		return fmt.Sprintf("/news/%d/story%%2D%d.html", ky, k) // %2D is "-"
	case 10:
		return fmt.Sprintf("/news/%d/%%73tory-%d.html", ky, k) // %73 is "s"
	case 11:
		return root + ";jsessionid=0123456789ABCDEF0123456789ABCDEF"
	default:
		return fmt.Sprintf("/news/%d/./%s", ky, name)
	}
}

// binary returns a deterministic pseudo-random body for a /files/ path.
func (w *Web) binary(h int, p string) []byte {
	var seed uint64
	for _, c := range []byte(p) {
		seed = seed*31 + uint64(c)
	}
	rng := w.rng(h, rngBinary, seed)
	out := make([]byte, 24<<10)
	copy(out, "%PDF-1.4\n")
	for i := 9; i < len(out); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8 && i+j < len(out); j++ {
			out[i+j] = byte(v >> (8 * j))
		}
	}
	return out
}

func (w *Web) serveBig(rw http.ResponseWriter) {
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("Content-Length", strconv.Itoa(w.cfg.BigBytes))
	head := "<!doctype html><html><head><title>archive</title></head><body><p>"
	tail := "</p></body></html>"
	chunk := bytes.Repeat([]byte("archive "), 4096)
	rest := max(w.cfg.BigBytes-len(head)-len(tail), 0)
	if _, err := rw.Write([]byte(head)); err != nil {
		return
	}
	for rest > 0 {
		n := min(rest, len(chunk))
		if _, err := rw.Write(chunk[:n]); err != nil {
			return // the crawler stopped reading at its body cap: expected
		}
		rest -= n
	}
	_, _ = rw.Write([]byte(tail))
}
