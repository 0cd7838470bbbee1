// Package httpfetch performs one HTTP GET the way the crawler needs it:
// bounded in time (connect, TLS, response header, total), bounded in size,
// never to private or loopback addresses unless allowed, without following
// redirects, optionally through a forward proxy, and with text bodies
// converted to UTF-8.
//
// Fetch never returns a Go error: every outcome, success or failure, is a
// Response whose Kind classifies the failure (package failure).
package httpfetch

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/libs/bufpool"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// Defaults of Options.
const (
	DefaultUserAgent             = "trawl/0.1 (+https://github.com/trawl-crawler/trawl)"
	DefaultConnectTimeout        = 10 * time.Second
	DefaultResponseHeaderTimeout = 15 * time.Second
	DefaultFetchTimeout          = 30 * time.Second
	DefaultMaxBodyBytes          = 2 << 20
	DefaultMaxDocumentBytes      = 8 << 20
	DefaultMinTransferRate       = 1024 // bytes/s
	DefaultTransferRateWindow    = 10 * time.Second
	DefaultMaxIdleConns          = 4096
	DefaultIdleConnTimeout       = 15 * time.Second
)

// Buffers of a connection: net/http keeps a reader and a writer of these
// sizes for the life of every connection, idle ones included. A request
// is a few hundred bytes; a body is read straight into the caller's
// buffer once the headers are parsed. With net/http's 4 KiB each an idle
// connection cost 12.5 KB of heap, with these 5 KB (plus 8 KB of its two
// goroutines' stacks).
const (
	connReadBuffer  = 2048
	connWriteBuffer = 1024
)

// ProxyPicker chooses the forward proxy for a host. Implementations must be
// safe for concurrent use and must not block.
type ProxyPicker interface {
	// Pick returns the proxy for host (a politeness key); ok is false
	// when the request should go direct.
	Pick(host string) (id string, proxyURL *url.URL, ok bool)
	// IsProxyAddr reports whether host:port is the address of a known
	// proxy; the dialer lets such dials through the private-address check
	// (proxies are operator-chosen infrastructure).
	IsProxyAddr(addr string) bool
}

// Options configures a Fetcher.
type Options struct {
	UserAgent             string
	ConnectTimeout        time.Duration // TCP connect and TLS handshake, each
	ResponseHeaderTimeout time.Duration // from request written to response headers
	FetchTimeout          time.Duration // whole request including the body
	MaxBodyBytes          int64         // body cap on the decoded body; the rest is not read
	// MaxDocumentBytes is the body cap of a kept document (Request.Keep,
	// by its Content-Type): a PDF is often larger than a page; when below
	// MaxBodyBytes, MaxBodyBytes applies.
	MaxDocumentBytes int64
	// MinTransferRate (bytes/s, on the wire) over each TransferRateWindow
	// of a body download; a slower body is cut off (failure.TooSlow).
	// Negative disables the check; zero means the default.
	MinTransferRate    int64
	TransferRateWindow time.Duration
	AllowPrivate       bool        // allow loopback, private, link-local, ... targets
	Proxies            ProxyPicker // nil: always direct
	// Credentials are basic-auth credentials per site, keyed by host[:port]
	// as in the URL (lower case); sent only to that host, only over https
	// unless the entry allows http. Never logged.
	Credentials map[string]Credential
	// Cookies keeps the cookies each site sets and sends them back to it
	// (a cookie jar scoped by the public suffix list).
	Cookies bool
	// MaxCookieHosts bounds the hosts whose cookies are kept (least
	// recently used dropped first) and MaxCookiesPerHost the cookies of
	// one host (new ones beyond it are ignored). Defaults 4096 and 50.
	MaxCookieHosts    int
	MaxCookiesPerHost int
	// DNSCacheTTL is how long a host name's addresses are reused
	// (default 5m); DNSCacheSize bounds the names cached (default 10000).
	// The private-address check applies to every cached address dialled.
	DNSCacheTTL  time.Duration
	DNSCacheSize int
	// Lookup resolves host names (default net.DefaultResolver.LookupNetIP).
	Lookup LookupFunc
	// RootCAs, when set, replaces the system roots for TLS (private CAs,
	// tests).
	RootCAs *x509.CertPool
	// MaxIdleConns bounds the idle connections kept for reuse, one per
	// host at most (a host has one request at a time): size it to the
	// hosts the fetcher may have in flight (default 4096). IdleConnTimeout
	// closes a connection unused that long (default 15s): a host whose
	// turns keep coming keeps its connection, one the crawl left does not.
	MaxIdleConns    int
	IdleConnTimeout time.Duration
	// Metrics receives the requests' metrics (fetch_duration_seconds,
	// bytes_fetched_total, replays_refused_total); nil: unexported.
	Metrics prometheus.Registerer
}

// Credential is a site's basic-auth login.
type Credential struct {
	Username  string `json:"username"`
	Password  string `json:"password"`
	AllowHTTP bool   `json:"allow_http"` // also send it over plain http
}

func (o Options) withDefaults() Options {
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxDocumentBytes <= 0 {
		o.MaxDocumentBytes = DefaultMaxDocumentBytes
	}
	if o.MinTransferRate == 0 {
		o.MinTransferRate = DefaultMinTransferRate
	}
	if o.TransferRateWindow <= 0 {
		o.TransferRateWindow = DefaultTransferRateWindow
	}
	if o.MaxCookieHosts <= 0 {
		o.MaxCookieHosts = DefaultMaxCookieHosts
	}
	if o.MaxCookiesPerHost <= 0 {
		o.MaxCookiesPerHost = DefaultMaxCookiesPerHost
	}
	if o.DNSCacheTTL <= 0 {
		o.DNSCacheTTL = DefaultDNSCacheTTL
	}
	if o.DNSCacheSize <= 0 {
		o.DNSCacheSize = DefaultDNSCacheSize
	}
	if o.Lookup == nil {
		o.Lookup = net.DefaultResolver.LookupNetIP
	}
	if o.MaxIdleConns <= 0 {
		o.MaxIdleConns = DefaultMaxIdleConns
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = DefaultIdleConnTimeout
	}
	return o
}

// Fetcher is an HTTP client for crawling. Safe for concurrent use; Close
// releases idle connections.
type Fetcher struct {
	opts   Options
	dns    *dnsCache
	conns  *conns // direct connections, for Release
	client *http.Client
	dial   func(ctx context.Context, network, addr string) (net.Conn, error) // checked: refuses private targets unless allowed
	m      *metrics
}

type proxyCtxKey struct{}

// New returns a Fetcher.
func New(o Options) *Fetcher {
	o = o.withDefaults()
	checked := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	if !o.AllowPrivate {
		checked.Control = refusePrivate
	}
	direct := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	dns := newDNSCache(o.Lookup, o.DNSCacheTTL, o.DNSCacheSize)
	checkedDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dns.dial(ctx, checked, network, addr)
	}
	kept := &conns{}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if o.Proxies != nil && o.Proxies.IsProxyAddr(addr) {
			c, err := direct.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &countedConn{Conn: c}, nil
		}
		c, err := checkedDial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return kept.keep(addr, c), nil
	}
	tr := &http.Transport{
		// The proxy was chosen by Fetch (sticky per host) and travels in
		// the request context.
		Proxy: func(r *http.Request) (*url.URL, error) {
			if u, ok := r.Context().Value(proxyCtxKey{}).(*url.URL); ok {
				return u, nil
			}
			return nil, nil
		},
		DialContext:       dial,
		ForceAttemptHTTP2: true,
		// We send Accept-Encoding and decode ourselves, so that the body
		// cap counts decoded bytes and every coding is handled alike.
		DisableCompression:     true,
		TLSHandshakeTimeout:    o.ConnectTimeout,
		ResponseHeaderTimeout:  o.ResponseHeaderTimeout,
		ExpectContinueTimeout:  time.Second,
		MaxIdleConns:           o.MaxIdleConns,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        o.IdleConnTimeout,
		MaxResponseHeaderBytes: 256 << 10,
		ReadBufferSize:         connReadBuffer,
		WriteBufferSize:        connWriteBuffer,
	}
	if o.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12}
	}
	var jar http.CookieJar
	if o.Cookies {
		jar = newBoundedJar(o.MaxCookieHosts, o.MaxCookiesPerHost)
	}
	return &Fetcher{
		m:     newMetrics(o.Metrics),
		opts:  o,
		dns:   dns,
		conns: kept,
		dial:  checkedDial,
		client: &http.Client{
			Jar:       jar,
			Transport: tr,
			// Redirects are not followed inline: the target goes back
			// through the frontier so its own politeness applies.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// Close closes idle connections.
func (f *Fetcher) Close() { f.client.CloseIdleConnections() }

// UserAgent returns the User-Agent header sent.
func (f *Fetcher) UserAgent() string { return f.opts.UserAgent }

// Request is one fetch.
type Request struct {
	URL          string
	Host         string // politeness key, for the proxy choice
	ETag         string // sent as If-None-Match
	LastModified string // sent as If-Modified-Since
	// MaxBodyBytes overrides Options.MaxBodyBytes when > 0.
	MaxBodyBytes int64
	// Raw keeps any body as received (no content-type filter, no charset
	// conversion); used for robots.txt.
	Raw bool
	// Sitemap: a robots.txt Sitemap line named the URL, so a gzip body
	// (application/gzip, application/x-gzip) is kept as received for the
	// parser, as it is for any URL whose path ends in .xml.gz.
	Sitemap bool
	// Capture keeps the exchange as sent and received in
	// Response.Exchange, for the WARC archive.
	Capture bool
	// UserAgent, when set, replaces Options.UserAgent: a crawl's own
	// (crawlv1.Identity). Header are extra headers set after the
	// fetcher's own, replacing one of the same name (Accept); a crawl's.
	// The caller checks both with libs/identity, which refuses the
	// headers the fetcher sets itself, hop-by-hop headers, Host and
	// Cookie. Neither applies to FTP.
	UserAgent string
	Header    []identity.Header
	// Keep are media types beyond text whose body is downloaded and kept
	// as received, within the body cap: the documents a crawl reads (PDF,
	// office files; CrawlSpec.documents). Other binary bodies are not
	// downloaded.
	Keep []string
}

// keptType is the media type under which the body of an answer of media
// type mt for a URL path is kept as received (a document of Keep, by its
// type or, when the server says only application/octet-stream, by the
// path's extension), "" when it is not.
func (r Request) keptType(mt, path string) string {
	if len(r.Keep) == 0 {
		return ""
	}
	return doctypes.KeptType(r.Keep, mt, path)
}

// Response is the outcome of one fetch. Kind is failure.None on an HTTP
// answer that was fully read; Err carries the failure or, for 429/5xx, a
// *failure.StatusError.
type Response struct {
	Status           int
	ProtoMajor       int               // HTTP major version of the answer (1 or 2)
	Header           map[string]string // the headers that matter, lower-case keys
	ContentType      string            // media type, lower-case, without parameters
	Charset          string            // source charset of a text body (the Body is UTF-8)
	Body             []byte
	BodyBytes        int64 // bytes of the body (after content decoding)
	WireBytes        int64 // bytes of the body as received (before content decoding)
	Truncated        bool
	RedirectLocation string // absolute Location of a 3xx answer
	RetryAfter       time.Duration
	Kind             failure.Kind
	Err              error
	Start            time.Time
	TTFB             time.Duration
	Duration         time.Duration
	ProxyID          string
	Host             string // Request.Host (politeness key)
	// Rendered is how the load of the page in a headless browser ended
	// (browser.Outcome) when Body is the DOM the browser built from the
	// fetched body (the fetcher's --render); "" when it is the body as
	// fetched.
	Rendered string
	// ReplayRefused: the connection closed after the request was sent,
	// and net/http's replay of it on another connection was refused
	// (replayGuard); Err is a Connect failure wrapping ErrReplayRefused.
	ReplayRefused bool
	// Exchange is the request and answer as sent and received, with
	// Request.Capture, when an answer came (nil otherwise).
	Exchange *Exchange
	// pooled is the bufpool buffer of Body, given back by Release;
	// captured, when Body was converted from an unencoded body the
	// capture holds as received, is that body's buffer.
	pooled, captured []byte
}

// Release gives the buffers of the body (and of the capture's copy of
// it, Exchange.Body) back to be reused by a later fetch, and clears Body
// and Exchange.Body. The caller must hold no reference into either, nor
// have given one out: a message carrying the body is encoded (a copy),
// and the exchange archived, before Release. Without a call the buffers
// are left to the collector.
func (r *Response) Release() {
	for _, b := range [][]byte{r.pooled, r.captured} {
		if b != nil {
			bufpool.Put(b)
		}
	}
	r.pooled, r.captured, r.Body = nil, nil, nil
	if r.Exchange != nil {
		r.Exchange.Body = nil
	}
}

// keptHeaders are copied into Response.Header.
var keptHeaders = []string{"Date", "Last-Modified", "Etag", "Content-Length", "Content-Language", "X-Robots-Tag", "Location", "Retry-After"}

// Fetch performs a GET of r.URL. It blocks for at most the fetch timeout.
func (f *Fetcher) Fetch(ctx context.Context, r Request) *Response {
	resp := &Response{Start: time.Now(), Host: r.Host}
	defer func() {
		resp.Duration = time.Since(resp.Start)
		if resp.Err != nil && resp.Kind == failure.None {
			resp.Kind = failure.KindOf(resp.Err) // None for a *StatusError
		}
		f.m.observe(resp)
	}()
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "ftp") {
		resp.Err = fmt.Errorf("parse %q: %w", r.URL, failure.ErrInvalidURL)
		return resp
	}
	if u.Scheme == "ftp" {
		// direct: forward proxies carry HTTP, not FTP sessions
		f.fetchFTP(ctx, u, r, resp)
		return resp
	}
	ctx, cancelCause := context.WithCancelCause(ctx)
	defer cancelCause(nil)
	ctx, cancel := context.WithTimeout(ctx, f.opts.FetchTimeout)
	defer cancel()

	if f.opts.Proxies != nil {
		if id, pu, ok := f.opts.Proxies.Pick(r.Host); ok {
			if !f.opts.AllowPrivate {
				// The proxy resolves the target, so our dialer cannot
				// check it: check it here.
				if err := checkTarget(ctx, f.dns, u.Hostname()); err != nil {
					resp.Err = err
					return resp
				}
			}
			ctx = context.WithValue(ctx, proxyCtxKey{}, pu)
			resp.ProxyID = id
		}
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		resp.Err = fmt.Errorf("build request: %w", failure.ErrInvalidURL)
		return resp
	}
	ua := f.opts.UserAgent
	if r.UserAgent != "" {
		ua = r.UserAgent
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.5")
	req.Header.Set("Accept-Encoding", AcceptEncoding)
	for _, h := range r.Header {
		req.Header.Set(h.Name, h.Value)
	}
	if c, ok := f.opts.Credentials[strings.ToLower(u.Host)]; ok && (u.Scheme == "https" || c.AllowHTTP) {
		req.SetBasicAuth(c.Username, c.Password)
	}
	if r.ETag != "" {
		req.Header.Set("If-None-Match", r.ETag)
	}
	if r.LastModified != "" {
		req.Header.Set("If-Modified-Since", r.LastModified)
	}
	var ex *Exchange
	if r.Capture {
		ex = &Exchange{}
		req = captureConn(req, ex)
	}
	req, guard := guardReplay(req, cancelCause)
	hr, err := f.client.Do(req)
	resp.TTFB = time.Since(resp.Start)
	if guard.Refused() {
		resp.ReplayRefused = true
		if err == nil { // cannot happen: the request's context is cancelled
			closeBody(hr)
		}
		resp.Err = fmt.Errorf("get: %w", &failure.Error{Kind: failure.Connect, Err: ErrReplayRefused})
		return resp
	}
	if err != nil {
		resp.Err = fmt.Errorf("get: %w", err)
		return resp
	}
	defer closeBody(hr)
	if ex != nil {
		requestExchange(req, ex)
		responseExchange(hr, ex)
		resp.Exchange = ex
	}

	resp.Status = hr.StatusCode
	resp.ProtoMajor = hr.ProtoMajor
	resp.Header = make(map[string]string)
	for _, k := range keptHeaders {
		if v := hr.Header.Get(k); v != "" {
			resp.Header[strings.ToLower(k)] = v
		}
	}
	ctHeader := hr.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ctHeader); err == nil {
		resp.ContentType = strings.ToLower(mt)
	}
	if hr.StatusCode == http.StatusTooManyRequests || hr.StatusCode >= 500 {
		resp.RetryAfter = parseRetryAfter(hr.Header.Get("Retry-After"), time.Now())
		resp.Err = &failure.StatusError{Code: hr.StatusCode, RetryAfter: resp.RetryAfter}
	}
	if hr.StatusCode >= 300 && hr.StatusCode < 400 {
		if loc := hr.Header.Get("Location"); loc != "" {
			if lu, err := u.Parse(loc); err == nil {
				resp.RedirectLocation = lu.String()
				resp.Kind = failure.Redirect
			}
		}
		return resp // the body of a redirect is not worth reading
	}

	limit := f.opts.MaxBodyBytes
	if r.MaxBodyBytes > 0 {
		limit = r.MaxBodyBytes
	}
	keepRaw := r.Raw || gzipSitemap(r, u, resp.ContentType)
	if kept := r.keptType(resp.ContentType, u.Path); kept != "" {
		// A document the crawl reads: its own cap, and the type it is
		// read as (a PDF sent as application/octet-stream is a PDF).
		resp.ContentType, keepRaw = kept, true
		if r.MaxBodyBytes <= 0 {
			limit = max(limit, f.opts.MaxDocumentBytes)
		}
	}
	if !keepRaw && resp.ContentType != "" && !IsText(resp.ContentType) {
		// Fetched and published, but the body of binary content is of no
		// use to the parser: do not download it.
		return resp
	}
	wire := &countingReader{r: hr.Body}
	watch := watchRate(wire, f.opts.MinTransferRate, f.opts.TransferRateWindow, cancelCause)
	coding := hr.Header.Get("Content-Encoding")
	identity := coding == "" || strings.EqualFold(strings.TrimSpace(coding), "identity")
	var src io.Reader = wire
	var wireCopy *bytes.Buffer
	if ex != nil && !identity {
		// The coded bytes differ from the body: keep a copy as received.
		// An unencoded body is its own copy (below).
		wireCopy = &bytes.Buffer{}
		src = teeWire{r: wire, buf: wireCopy}
	}
	dec, release, err := decodeBody(coding, src)
	var body []byte
	if err == nil {
		hint := int64(0) // the announced length of an unencoded body
		if identity {
			hint = hr.ContentLength
		}
		body, err = readAll(io.LimitReader(dec, limit+1), min(hint, limit+1))
		release()
		// The caller's Release recycles the buffer, once the page's
		// record is encoded and the capture (which may share it) archived.
		resp.pooled = body
	}
	watch.Stop()
	resp.BodyBytes = int64(len(body))
	resp.WireBytes = wire.n.Load()
	if err != nil {
		resp.Err = fmt.Errorf("read body: %w", err)
		resp.Body = nil
		if cause := context.Cause(ctx); errors.Is(cause, failure.ErrTooSlow) {
			resp.Kind, resp.Err = failure.TooSlow, fmt.Errorf("read body: %w", cause)
		} else if errors.Is(err, errUnsupportedEncoding) {
			resp.Kind = failure.Unsupported
		} else if resp.Kind == failure.None {
			resp.Kind = failure.KindOf(err)
			if ctx.Err() != nil {
				resp.Kind = failure.Timeout
			}
		}
		return resp
	}
	if int64(len(body)) > limit {
		body = body[:limit]
		resp.BodyBytes = limit
		resp.Truncated = true
		resp.Kind = failure.BodyTooLarge
		if !identity && limit > bombRatio*resp.WireBytes {
			// The cap was reached from a tiny download: a bomb, not a
			// page. Nothing of it is worth keeping.
			resp.Kind = failure.DecompressionBomb
			resp.Err = fmt.Errorf("read body: %d bytes decoded from %d: %w", limit, resp.WireBytes, failure.ErrDecompressionBomb)
			return resp
		}
		if resp.Err == nil {
			resp.Err = fmt.Errorf("read body: over %d bytes: %w", limit, failure.ErrBodyTooLarge)
		}
	}
	if ex != nil {
		ex.BodyRead = true
		ex.Body = body
		if wireCopy != nil {
			ex.Body = wireCopy.Bytes()
		}
	}
	if len(body) == 0 {
		return resp
	}
	if resp.ContentType == "" {
		sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(body))
		resp.ContentType = sniffed
		keepRaw = keepRaw || gzipSitemap(r, u, sniffed)
		if kept := r.keptType(sniffed, u.Path); kept != "" {
			resp.ContentType, keepRaw = kept, true
		}
		if !keepRaw && !IsText(sniffed) {
			return resp
		}
	}
	if keepRaw {
		resp.Body = body
		return resp
	}
	resp.Body, resp.Charset = toUTF8(body, ctHeader, resp.ContentType, bufpool.Get)
	if unsafe.SliceData(resp.Body) != unsafe.SliceData(body) {
		// Converted: the bytes as received are no longer needed, unless
		// the capture holds them (an unencoded body is its own copy as
		// received); then Release gives both back.
		if ex != nil && identity {
			resp.captured = body
		} else {
			bufpool.Put(body)
		}
		resp.pooled = resp.Body
	}
	return resp
}

// Unread body bytes closeBody reads so that the connection is reused.
const (
	maxDrainKnown   = 16 << 10 // a body of announced length up to this
	maxDrainUnknown = 4 << 10  // of a chunked body, at most this
)

// closeBody closes a response body. net/http closes the connection of a
// body closed before its end, and the next request to the host opens a new
// one: a redirect's short HTML and a small binary's bytes are left unread
// by Fetch, so what is left of a small body is read first (one connection
// per host instead of one per redirect on the bench web). A large rest (a
// body over the cap, a big binary) is not worth downloading: closed.
func closeBody(hr *http.Response) {
	n := int64(maxDrainUnknown)
	if hr.ContentLength >= 0 {
		n = 0
		if hr.ContentLength <= maxDrainKnown {
			n = hr.ContentLength + 1 // +1: up to the EOF that frees the connection
		}
	}
	if n > 0 {
		_, _ = io.CopyN(io.Discard, hr.Body, n) // what it could not read is closed below
	}
	_ = hr.Body.Close()
}

// readAll is io.ReadAll into a bufpool buffer sized for hint bytes when
// hint is positive (a Content-Length): one buffer for the body instead of
// a growing series of them. A body longer than announced still reads
// whole; a buffer outgrown is given back to the pool.
func readAll(r io.Reader, hint int64) ([]byte, error) {
	size := readAllStart
	if hint > 0 {
		size = int(hint) + 1 // +1: the final read sees EOF without growing
	}
	b := bufpool.Get(size)
	for {
		if len(b) == cap(b) {
			grown := append(b, 0)[:len(b)]
			bufpool.Put(b)
			b = grown
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return b, err
		}
	}
}

// readAllStart is the first buffer of a body of unknown length: most
// pages fit it.
const readAllStart = 32 << 10

// gzipSitemap reports whether a body of media type mt is a gzip sitemap
// to keep as received: gzip named by a robots.txt Sitemap line or at a
// path ending in .xml.gz (the parser recognizes gzip by its magic bytes).
func gzipSitemap(r Request, u *url.URL, mt string) bool {
	if mt != "application/gzip" && mt != "application/x-gzip" {
		return false
	}
	return r.Sitemap || strings.HasSuffix(strings.ToLower(u.Path), ".xml.gz")
}

// IsText reports whether a body of media type mt is kept for the parser:
// HTML, XHTML, plain text and XML types.
func IsText(mt string) bool {
	switch mt {
	case "text/html", "application/xhtml+xml", "text/plain", "text/xml", "application/xml":
		return true
	}
	return strings.HasSuffix(mt, "+xml")
}

// parseRetryAfter parses delta-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		if s < 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// refusePrivate is the dialer's Control: it runs on the resolved address
// of every connection, so neither DNS nor a redirect can reach a refused
// address.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("split %q: %w", address, failure.ErrRefusedAddress)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("parse %q: %w", host, failure.ErrRefusedAddress)
	}
	if Refused(ip) {
		return fmt.Errorf("dial %s: %w", ip, failure.ErrRefusedAddress)
	}
	return nil
}

var (
	sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT
	thisNetwork        = netip.MustParsePrefix("0.0.0.0/8")
	benchmarking       = netip.MustParsePrefix("198.18.0.0/15")
	reserved           = netip.MustParsePrefix("240.0.0.0/4") // includes broadcast
)

// Refused reports whether the crawler refuses to connect to ip by default:
// loopback, private, link-local, multicast, unspecified and other
// non-public ranges.
func Refused(ip netip.Addr) bool {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(),
		ip.IsLoopback(), ip.IsPrivate(), ip.IsUnspecified(),
		ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(),
		ip.IsInterfaceLocalMulticast(), ip.IsMulticast():
		return true
	}
	if ip.Is4() {
		for _, p := range []netip.Prefix{sharedAddressSpace, thisNetwork, benchmarking, reserved} {
			if p.Contains(ip) {
				return true
			}
		}
	}
	return false
}

// Resolve returns the address a request to host connects to first (an IP
// literal is its own address), through the fetcher's DNS cache, so asking
// before a fetch costs the fetch no extra lookup. host may carry a port
// (a politeness key, "example.com:8080", "[::1]:8080"); it is ignored.
func (f *Fetcher) Resolve(ctx context.Context, host string) (netip.Addr, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip, nil
	}
	ips, err := f.dns.resolve(ctx, host)
	if err != nil {
		return netip.Addr{}, err
	}
	return ips[0], nil
}

// checkTarget resolves host and refuses it if any address is refused.
func checkTarget(ctx context.Context, dns *dnsCache, host string) error {
	if ip, err := netip.ParseAddr(host); err == nil {
		if Refused(ip) {
			return fmt.Errorf("check target %s: %w", ip, failure.ErrRefusedAddress)
		}
		return nil
	}
	ips, err := dns.resolve(ctx, host)
	if err != nil {
		return err
	}
	for _, ip := range ips {
		if Refused(ip) {
			return fmt.Errorf("check target %s (%s): %w", host, ip, failure.ErrRefusedAddress)
		}
	}
	if len(ips) == 0 {
		return fmt.Errorf("resolve %s: %w", host, errors.New("no addresses"))
	}
	return nil
}

// ReadCredentials parses a credentials file: a JSON object mapping a site's
// host[:port] to {"username", "password", "allow_http"}. Errors never
// quote the content.
func ReadCredentials(r io.Reader) (map[string]Credential, error) {
	var m map[string]Credential
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("parse credentials: syntax error at byte %d", se.Offset)
		}
		return nil, errors.New("parse credentials: not an object of host to {username, password, allow_http}")
	}
	out := make(map[string]Credential, len(m))
	for host, c := range m {
		if host == "" || c.Username == "" {
			return nil, fmt.Errorf("parse credentials: entry %q needs a host and a username", host)
		}
		out[strings.ToLower(host)] = c
	}
	return out, nil
}
