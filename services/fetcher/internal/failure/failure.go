// Package failure is the closed set of fetch error kinds: the value of
// FetchedPage.error_kind, of the fetch_log error_kind column and of the
// error_kind metric label (bounded). HTTP status classes are not error kinds:
// a 404 or 503 is an answer and its status code carries it.
package failure

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Kind classifies the outcome of a fetch attempt.
type Kind string

// The error kinds. Add new ones here only; they are a metric label.
const (
	None              Kind = ""                   // an HTTP answer was received and kept
	DNS               Kind = "dns"                // the host name did not resolve
	Connect           Kind = "connect"            // TCP connection refused, reset or unreachable
	Timeout           Kind = "timeout"            // connect, header or total deadline passed
	TLS               Kind = "tls"                // TLS handshake or certificate failure
	RefusedAddress    Kind = "refused_address"    // target resolves to a private/loopback/... address
	BodyTooLarge      Kind = "body_too_large"     // body cut at the size cap (partial body kept)
	RobotsDenied      Kind = "robots_denied"      // robots.txt disallows the URL: no request made
	RobotsUnavailable Kind = "robots_unavailable" // robots.txt answered 5xx/429 or failed: no request made, retry later
	Redirect          Kind = "redirect"           // 3xx with a Location (informational; target published)
	InvalidURL        Kind = "invalid_url"        // unparseable URL or unsupported scheme
	TooSlow           Kind = "too_slow"           // body arrived below the minimum transfer rate: cut off
	DecompressionBomb Kind = "decompression_bomb" // decoded body over the cap at an implausible compression ratio
	RedirectLoop      Kind = "redirect_loop"      // the Location is the requested resource itself (its dedup key); nothing published
	TooManyRedirects  Kind = "too_many_redirects" // the URL was reached through --max-redirects redirects already; its target is not published
	Unsupported       Kind = "unsupported"        // an answer we cannot decode (unknown Content-Encoding)
	Cancelled         Kind = "cancelled"          // the crawl was cancelled before the request: no request made
	BudgetExhausted   Kind = "budget_exhausted"   // the crawl's page budget was spent before the request: no request made
	Other             Kind = "other"              // anything else
)

// Kinds lists every kind, for pre-initializing metrics.
var Kinds = []Kind{None, DNS, Connect, Timeout, TLS, RefusedAddress, BodyTooLarge, RobotsDenied, RobotsUnavailable, Redirect, InvalidURL,
	TooSlow, DecompressionBomb, RedirectLoop, TooManyRedirects, Unsupported, Cancelled, BudgetExhausted, Other}

// ErrRefusedAddress is returned when the dialer refuses a target address.
var ErrRefusedAddress = errors.New("refused address")

// ErrInvalidURL is returned for URLs that cannot be fetched.
var ErrInvalidURL = errors.New("invalid url")

// ErrBodyTooLarge is returned when the body exceeded the size cap.
var ErrBodyTooLarge = errors.New("body too large")

// ErrTooSlow is returned when a body arrives below the minimum transfer rate.
var ErrTooSlow = errors.New("transfer too slow")

// ErrDecompressionBomb is returned when a compressed body decodes past the
// size cap at an implausible ratio.
var ErrDecompressionBomb = errors.New("decompression bomb")

// Error is a fetch failure with its kind.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v", e.Kind, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// StatusError is an HTTP answer that signals a temporary failure (429, 5xx);
// RetryAfter is the server's Retry-After, zero when absent.
type StatusError struct {
	Code       int
	RetryAfter time.Duration
}

func (e *StatusError) Error() string {
	return "http status " + strconv.Itoa(e.Code)
}

// KindOf returns the kind of err: the Kind of a wrapped *Error, otherwise
// a classification of the transport error.
func KindOf(err error) Kind {
	if err == nil {
		return None
	}
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Kind
	}
	var se *StatusError
	if errors.As(err, &se) {
		return None // an answer: the status code carries it
	}
	return Classify(err)
}

// Classify maps a transport error of net/http to a kind.
func Classify(err error) Kind {
	if err == nil {
		return None
	}
	var (
		dnsErr  *net.DNSError
		opErr   *net.OpError
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
		unkAuth x509.UnknownAuthorityError
		hostErr x509.HostnameError
		invErr  x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, ErrRefusedAddress):
		return RefusedAddress
	case errors.Is(err, ErrInvalidURL):
		return InvalidURL
	case errors.Is(err, ErrBodyTooLarge):
		return BodyTooLarge
	case errors.Is(err, ErrTooSlow):
		return TooSlow
	case errors.Is(err, ErrDecompressionBomb):
		return DecompressionBomb
	case errors.As(err, &dnsErr):
		if dnsErr.IsTimeout {
			return Timeout
		}
		return DNS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return Timeout
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alert),
		errors.As(err, &unkAuth), errors.As(err, &hostErr), errors.As(err, &invErr):
		return TLS
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Timeout
	}
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return Connect
	}
	if errors.As(err, &opErr) {
		return Connect
	}
	return Other
}

// IsRetryable reports whether a later attempt of the same fetch may
// succeed. The scheduler decides whether and when to retry.
func IsRetryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		// 429 and 5xx are the server asking us to come back later
		// (Retry-After, when given, says when).
		return se.Code == 429 || se.Code >= 500
	}
	switch KindOf(err) {
	case None:
		// no error: nothing to retry.
		return false
	case DNS:
		// resolution failures are often transient (resolver hiccup,
		// SERVFAIL); NXDOMAIN too sometimes during DNS changes. Retrying a
		// few times is cheap.
		return true
	case Connect:
		// refused/reset/unreachable: the server may be restarting.
		return true
	case Timeout:
		// slow or overloaded server; a later attempt may be faster.
		return true
	case TLS:
		// certificate and protocol errors are configuration problems
		// that do not fix themselves within a crawl.
		return false
	case RefusedAddress:
		// our own safety policy; the answer will not change.
		return false
	case BodyTooLarge:
		// the page will still be too large; the partial body was kept.
		return false
	case RobotsDenied:
		// the site asked not to be crawled there.
		return false
	case RobotsUnavailable:
		// robots.txt could not be read (5xx, 429, network): we did not
		// ask for the page; try again once robots.txt is readable.
		return true
	case Redirect:
		// informational: the target was published as a new URL.
		return false
	case InvalidURL:
		// the URL will stay invalid.
		return false
	case TooSlow:
		// like a timeout: the server may be faster later.
		return true
	case DecompressionBomb, Unsupported:
		// the same bytes will come back.
		return false
	case RedirectLoop, TooManyRedirects:
		// the site's configuration loops; it will not fix itself soon.
		return false
	case Cancelled:
		// the operator cancelled the crawl.
		return false
	case BudgetExhausted:
		// the crawl's page budget stays spent.
		return false
	default:
		// unknown failures (protocol errors, resets mid-body): one more
		// try is cheap and usually enough to tell.
		return true
	}
}
