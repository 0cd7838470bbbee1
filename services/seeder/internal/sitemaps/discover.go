package sitemaps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/trawl-crawler/trawl/libs/sitemap"
)

// Config bounds sitemap discovery.
type Config struct {
	Timeout      time.Duration // one request, connect to last byte
	Delay        time.Duration // between two requests to the same host
	MaxBodyBytes int64         // one response, and one sitemap after gunzip
	MaxSitemaps  int           // sitemaps fetched in one discovery
	MaxDepth     int           // nesting of sitemap indexes below the first sitemap
	MaxURLs      int           // URLs kept in one discovery
	AllowPrivate bool          // allow loopback, private and link-local addresses
	UserAgent    string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Timeout: 10 * time.Second, Delay: 500 * time.Millisecond, MaxBodyBytes: 10 << 20,
		MaxSitemaps: 100, MaxDepth: 3, MaxURLs: 100000, UserAgent: "trawl-seeder/1.0",
	}
}

// Validate reports unusable values.
func (c Config) Validate() error {
	var errs []error
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("validate sitemap-timeout: %v, want > 0", c.Timeout))
	}
	if c.Delay < 0 {
		errs = append(errs, fmt.Errorf("validate sitemap-delay: %v, want >= 0", c.Delay))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("validate sitemap-max-bytes: %d, want at least 1024", c.MaxBodyBytes))
	}
	if c.MaxSitemaps < 1 || c.MaxDepth < 0 || c.MaxURLs < 1 {
		errs = append(errs, errors.New("validate sitemap bounds: want max sitemaps and urls >= 1, depth >= 0"))
	}
	return errors.Join(errs...)
}

// Problem is something discovery could not use: a sitemap that failed,
// or an invalid entry of one.
type Problem struct {
	Source  string `json:"source"` // the sitemap or robots.txt URL
	Pos     int    `json:"pos,omitempty"`
	Message string `json:"message"`
}

// Result is what one discovery found.
type Result struct {
	Entries  []Entry
	Problems []Problem
	Fetched  int // requests made
}

// ErrPrivateAddress is returned when dialing a refused address.
var ErrPrivateAddress = errors.New("private address refused")

// Discoverer fetches robots.txt and sitemaps one request at a time, waiting
// Delay between two requests to the same host. Safe for concurrent use:
// discoveries run one after the other.
type Discoverer struct {
	cfg    Config
	client *http.Client
	mu     sync.Mutex           // one discovery at a time
	last   map[string]time.Time // host -> time of the last request
}

// New returns a Discoverer.
func New(cfg Config) *Discoverer {
	dialer := &net.Dialer{Timeout: cfg.Timeout}
	if !cfg.AllowPrivate {
		dialer.Control = refusePrivate
	}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       30 * time.Second,
	}
	client := &http.Client{
		Transport: tr,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	return &Discoverer{cfg: cfg, client: client, last: make(map[string]time.Time)}
}

// Close releases idle connections.
func (d *Discoverer) Close() { d.client.CloseIdleConnections() }

func refusePrivate(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("check address: %w", err)
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return fmt.Errorf("dial %s: %w", host, ErrPrivateAddress)
	}
	return nil
}

type queued struct {
	url      string
	depth    int
	implicit bool // the default /sitemap.xml: a 404 is not a problem
}

// Discover reads, for every distinct host of seedURLs, its robots.txt
// Sitemap lines and /sitemap.xml, plus the explicit sitemapURLs, and
// returns the URLs they list (deduplicated, in discovery order) and every
// problem met. It stops early, returning what it has, when ctx is done.
func (d *Discoverer) Discover(ctx context.Context, seedURLs, sitemapURLs []string) Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	for host, at := range d.last { // bounded: only hosts still inside their delay
		if time.Since(at) >= d.cfg.Delay {
			delete(d.last, host)
		}
	}
	var (
		res       Result
		queue     []queued
		seenMap   = make(map[string]bool)
		seenURL   = make(map[string]bool)
		seenHosts = make(map[string]bool)
	)
	enqueue := func(q queued) {
		if !seenMap[q.url] {
			seenMap[q.url] = true
			queue = append(queue, q)
		}
	}
	for _, raw := range sitemapURLs {
		u, err := sitemap.Resolve(nil, raw)
		if err != nil {
			res.Problems = append(res.Problems, Problem{Source: raw, Message: err.Error()})
			continue
		}
		enqueue(queued{url: u})
	}
	for _, raw := range seedURLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			continue
		}
		origin := u.Scheme + "://" + u.Host
		if seenHosts[origin] {
			continue
		}
		seenHosts[origin] = true
		robots := origin + "/robots.txt"
		body, status, err := d.get(ctx, robots, &res)
		switch {
		case err != nil:
			res.Problems = append(res.Problems, Problem{Source: robots, Message: err.Error()})
		case status == http.StatusOK:
			base, _ := url.Parse(robots)
			for _, e := range sitemap.RobotsSitemaps(body, base) {
				if e.Err != nil {
					res.Problems = append(res.Problems, Problem{Source: robots, Pos: e.Pos, Message: e.Err.Error()})
					continue
				}
				enqueue(queued{url: e.Loc})
			}
		}
		enqueue(queued{url: origin + "/sitemap.xml", implicit: true})
	}

	for len(queue) > 0 && ctx.Err() == nil {
		q := queue[0]
		queue = queue[1:]
		if res.Fetched >= d.cfg.MaxSitemaps+len(seenHosts) {
			res.Problems = append(res.Problems, Problem{Source: q.url, Message: fmt.Sprintf("skipped: more than %d sitemaps", d.cfg.MaxSitemaps)})
			continue
		}
		body, status, err := d.get(ctx, q.url, &res)
		if err == nil && status != http.StatusOK {
			if q.implicit && status == http.StatusNotFound {
				continue
			}
			err = fmt.Errorf("status %d", status)
		}
		var p Parsed
		if err == nil {
			base, _ := url.Parse(q.url)
			p, err = Parse(body, base, d.cfg.MaxURLs-len(res.Entries)+d.cfg.MaxSitemaps, d.cfg.MaxBodyBytes)
		}
		if err != nil {
			if !q.implicit || !errors.Is(err, sitemap.ErrNotSitemap) {
				res.Problems = append(res.Problems, Problem{Source: q.url, Message: err.Error()})
			}
			continue
		}
		for _, b := range p.Invalid {
			res.Problems = append(res.Problems, Problem{Source: q.url, Pos: b.Pos, Message: b.Err.Error()})
		}
		for _, s := range p.Sitemaps {
			if q.depth >= d.cfg.MaxDepth {
				res.Problems = append(res.Problems, Problem{Source: s, Message: fmt.Sprintf("skipped: sitemap indexes nested deeper than %d", d.cfg.MaxDepth)})
				continue
			}
			enqueue(queued{url: s, depth: q.depth + 1})
		}
		for _, e := range p.URLs {
			if seenURL[e.URL] {
				continue
			}
			if len(res.Entries) >= d.cfg.MaxURLs {
				res.Problems = append(res.Problems, Problem{Source: q.url, Message: fmt.Sprintf("stopped: more than %d urls", d.cfg.MaxURLs)})
				return res
			}
			seenURL[e.URL] = true
			res.Entries = append(res.Entries, e)
		}
	}
	return res
}

// get fetches rawURL politely and returns at most MaxBodyBytes of its body.
func (d *Discoverer) get(ctx context.Context, rawURL string, res *Result) ([]byte, int, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, 0, fmt.Errorf("parse url: %w", err)
	}
	if last, ok := d.last[u.Host]; ok {
		if wait := d.cfg.Delay - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, 0, ctx.Err()
			case <-t.C:
			}
		}
	}
	defer func() { d.last[u.Host] = time.Now() }()
	res.Fetched++
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("User-Agent", d.cfg.UserAgent)
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("fetch: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, d.cfg.MaxBodyBytes+1))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("read body: %w", err)
	}
	if int64(len(body)) > d.cfg.MaxBodyBytes {
		return nil, resp.StatusCode, fmt.Errorf("body over %d bytes: %w", d.cfg.MaxBodyBytes, sitemap.ErrTooLarge)
	}
	return body, resp.StatusCode, nil
}
