// Package check validates a proxy by fetching a known page through it: the
// answer must be 200 and, when configured, contain an expected string, which
// catches proxies that answer with content of their own.
package check

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// Outcomes of a check: a bounded set, used as a metric label.
const (
	OK           = "ok"
	Timeout      = "timeout"       // no complete answer within the timeout
	Connect      = "connect"       // proxy unreachable, refused, or the tunnel failed
	ProxyAuth    = "proxy_auth"    // the proxy answered 407
	BadStatus    = "status"        // an answer other than 200
	WrongContent = "wrong_content" // 200 without the expected string, or not the origin's TLS
	Transparent  = "transparent"   // the proxy revealed the client's address to the origin (LeakCheck)
	Error        = "error"         // anything else
	Canceled     = "canceled"      // the caller's context ended: no verdict
)

// DefaultMaxBody bounds how much of the check page is read.
const DefaultMaxBody = 1 << 20

// Config configures checks.
type Config struct {
	URL     string        // page fetched through each proxy
	Expect  string        // when set, the body must contain it
	Timeout time.Duration // whole check: connect, answer and body
	MaxBody int64         // bytes of the body searched for Expect (default DefaultMaxBody)
	// LeakCheck treats the check page as an echo of the request headers
	// (lines "Name: value", or JSON like httpbin's /headers): a proxy that
	// added X-Forwarded-For, X-Real-IP, Client-IP or Forwarded reveals the
	// client and is not alive (outcome transparent); one that added only
	// Via is anonymous, one that added neither is elite.
	LeakCheck bool
}

// Anonymity levels of a live proxy (Result.Anonymity, with LeakCheck).
const (
	Elite     = "elite"
	Anonymous = "anonymous"
)

// clientLeaks are headers that carry the client's address.
var clientLeaks = []string{"x-forwarded-for", "x-real-ip", "client-ip", "forwarded"}

// anonymity classifies an echo of the request headers.
func anonymity(body []byte) string {
	lower := strings.ToLower(string(body))
	for _, h := range clientLeaks {
		if echoes(lower, h) {
			return Transparent
		}
	}
	if echoes(lower, "via") {
		return Anonymous
	}
	return Elite
}

// echoes reports whether the lower-cased echo holds header h, as a line
// "h:" or a JSON key "h".
func echoes(lower, h string) bool {
	return strings.HasPrefix(lower, h+":") || strings.Contains(lower, "\n"+h+":") ||
		strings.Contains(lower, `"`+h+`"`)
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("check url %q: want an absolute http or https URL", c.URL)
	}
	if c.Timeout <= 0 {
		return errors.New("check timeout must be positive")
	}
	if c.MaxBody < 0 {
		return errors.New("check max body must not be negative")
	}
	return nil
}

// ClientFunc returns the HTTP client that sends requests through proxy e.
// The checker calls CloseIdleConnections on it after the check.
type ClientFunc func(e proxylist.Entry) (*http.Client, error)

// ProxyClient is the production ClientFunc: a fresh transport that sends
// everything through e (http, https or socks5, credentials from e.URL),
// never through the environment's proxy, without keep-alives and without
// following redirects (a redirect is a wrong answer for a check).
func ProxyClient(e proxylist.Entry) (*http.Client, error) {
	u, err := url.Parse(e.URL())
	if err != nil {
		return nil, fmt.Errorf("parse proxy %s: %w", e, errors.New("invalid url"))
	}
	tr := &http.Transport{
		Proxy:               http.ProxyURL(u),
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
		ForceAttemptHTTP2:   false,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12},
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// Result is the verdict on one proxy.
type Result struct {
	Entry     proxylist.Entry
	Alive     bool
	Outcome   string        // one of the outcome constants
	Status    int           // HTTP status, when an answer came
	Latency   time.Duration // until the body was read (also for failures)
	CheckedAt time.Time
	Err       error  // why it is not alive; never contains the proxy's credentials
	Anonymity string // Elite or Anonymous for a live proxy with LeakCheck
}

// Checker checks proxies. Safe for concurrent use.
type Checker struct {
	cfg       Config
	newClient ClientFunc
	now       func() time.Time
}

// New returns a checker; cfg must be valid.
func New(cfg Config, newClient ClientFunc, now func() time.Time) *Checker {
	if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	return &Checker{cfg: cfg, newClient: newClient, now: now}
}

// Check fetches the check page through e. It blocks for at most the
// configured timeout.
func (c *Checker) Check(ctx context.Context, e proxylist.Entry) Result {
	start := c.now()
	r := Result{Entry: e, CheckedAt: start}
	outcome, status, anon, err := c.fetch(ctx, e)
	r.Anonymity = anon
	r.Latency = c.now().Sub(start)
	r.Status = status
	r.Outcome = outcome
	if ctx.Err() != nil {
		r.Outcome = Canceled
	}
	r.Alive = r.Outcome == OK
	if err != nil {
		r.Err = redact(err, e)
	}
	return r
}

func (c *Checker) fetch(ctx context.Context, e proxylist.Entry) (outcome string, status int, anon string, err error) {
	outcome, status, body, err := c.get(ctx, e)
	if outcome != OK || !c.cfg.LeakCheck {
		return outcome, status, "", err
	}
	if anon = anonymity(body); anon == Transparent {
		return Transparent, status, "", errors.New("proxy reveals the client address")
	}
	return OK, status, anon, nil
}

func (c *Checker) get(ctx context.Context, e proxylist.Entry) (outcome string, status int, body []byte, err error) {
	client, err := c.newClient(e)
	if err != nil {
		return Error, 0, nil, err
	}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.URL, nil)
	if err != nil {
		return Error, 0, nil, fmt.Errorf("build check request: %w", err)
	}
	req.Header.Set("User-Agent", "trawl-proxypool/1")
	resp, err := client.Do(req)
	if err != nil {
		return classify(err), 0, nil, fmt.Errorf("fetch through proxy: %w", err)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxBody))
	if err != nil {
		return classify(err), resp.StatusCode, nil, fmt.Errorf("read check body: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusProxyAuthRequired:
		return ProxyAuth, resp.StatusCode, nil, errors.New("proxy requires other credentials")
	case resp.StatusCode != http.StatusOK:
		return BadStatus, resp.StatusCode, nil, fmt.Errorf("check page answered %d", resp.StatusCode)
	case c.cfg.Expect != "" && !strings.Contains(string(body), c.cfg.Expect):
		return WrongContent, resp.StatusCode, nil, errors.New("check page lacks the expected content")
	}
	return OK, resp.StatusCode, body, nil
}

// classify maps a transport error to an outcome.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return Timeout
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return Connect // dial, proxyconnect, socks handshake
	}
	if strings.Contains(err.Error(), "Proxy Authentication Required") {
		return ProxyAuth // CONNECT answered 407 (net/http has no typed error for it)
	}
	// The tunnel carried something other than the origin's TLS: the proxy
	// answered itself, or intercepts TLS with a certificate of its own.
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) || errors.As(err, new(tls.RecordHeaderError)) ||
		strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return WrongContent
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Connect // the proxy hung up
	}
	return Error
}

// redact returns err's message with e's credentials removed, as a new error
// (not wrapping err, so no caller can reach the original text).
func redact(err error, e proxylist.Entry) error {
	msg := err.Error()
	if e.HasUser {
		for _, secret := range []string{
			e.Password,
			url.QueryEscape(e.Password),
			url.PathEscape(e.Password),
			url.UserPassword(e.Username, e.Password).String(),
		} {
			if secret != "" {
				msg = strings.ReplaceAll(msg, secret, "xxxxx")
			}
		}
	}
	return errors.New(msg)
}
