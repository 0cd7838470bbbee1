// Package urlcanon parses, resolves and canonicalizes URLs the way browsers
// do (WHATWG URL standard, via github.com/nlnwa/whatwg-url), and derives the
// politeness key that partitions every URL topic.
//
// Every service uses this one package; there is no second canonicalizer.
package urlcanon

import "errors"

// Errors returned for URLs the crawler refuses.
var (
	// ErrInvalid: the string is not a parseable absolute URL.
	ErrInvalid = errors.New("invalid url")
	// ErrScheme: the scheme is not http, https or ftp.
	ErrScheme = errors.New("unsupported scheme")
	// ErrTooLong: longer than MaxLength after canonicalization.
	ErrTooLong = errors.New("url too long")
)

// MaxLength is the longest canonical URL accepted.
const MaxLength = 4096

// Canonicalize returns the canonical form of an absolute URL: scheme and host
// lower-cased, host IDNA (punycode) encoded, default port removed, dot
// segments resolved, percent-encoding normalized, fragment removed, empty path
// becomes "/". Canonicalize(Canonicalize(x)) == Canonicalize(x).
// Only http, https and ftp URLs are accepted.
func Canonicalize(raw string) (string, error) { panic("unimplemented") }

// Resolve resolves ref against base as a browser resolves an href (tabs and
// newlines stripped, surrounding spaces trimmed, backslashes as slashes in
// special schemes, "http:foo", "//host", …) and returns the canonical result.
func Resolve(base, ref string) (string, error) { panic("unimplemented") }

// PolitenessKey returns the partitioning key of a URL: its host, lower-cased
// and IDNA-encoded, followed by ":port" when the port is not the scheme's
// default. Two URLs with equal keys are fetched under the same politeness.
func PolitenessKey(rawURL string) (string, error) { panic("unimplemented") }
