package sitemap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// RobotsSitemaps returns the Sitemap lines of a robots.txt (the key
// case-insensitive, # comments cut), in order, as entries: Pos is the
// line, Loc the value resolved against base (the robots.txt URL) by
// Resolve. A value Resolve refuses, or a line longer than MaxLocBytes, is
// an entry with Err set and Loc as written.
func RobotsSitemaps(robotsTxt []byte, base *url.URL) []Entry {
	var out []Entry
	br := bufio.NewReader(bytes.NewReader(robotsTxt))
	for line := 1; ; line++ {
		text, tooLong, err := readLine(br, MaxLocBytes)
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		key, value, ok := strings.Cut(strings.TrimPrefix(text, bom), ":")
		if ok && strings.EqualFold(strings.TrimSpace(key), "sitemap") {
			e := Entry{Pos: line, Loc: strings.TrimSpace(value)}
			if tooLong {
				e.Err = ErrTooLong
			} else if u, err := Resolve(base, e.Loc); err != nil {
				e.Err = err
			} else {
				e.Loc = u
			}
			out = append(out, e)
		}
		if err != nil { // io.EOF: robotsTxt is in memory
			return out
		}
	}
}

// ErrSitemapURL is a sitemap location that is no http(s) URL.
var ErrSitemapURL = errors.New("invalid sitemap url")

// Resolve makes a sitemap location (a robots.txt Sitemap line, an entry of
// an index, one given by hand) an absolute http(s) URL: ref resolved
// against base (nil: ref must be absolute), its fragment dropped. The URL
// is not canonicalized. Errors wrap ErrSitemapURL.
func Resolve(base *url.URL, ref string) (string, error) {
	if ref == "" {
		return "", fmt.Errorf("empty location: %w", ErrSitemapURL)
	}
	u, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSitemapURL, err)
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", fmt.Errorf("%w %q: want absolute http(s)", ErrSitemapURL, short(ref))
	}
	u.Fragment = ""
	s := u.String()
	if _, err := url.Parse(s); err != nil { // "//::" resolves to "http://::"
		return "", fmt.Errorf("%w: %w", ErrSitemapURL, err)
	}
	return s, nil
}
