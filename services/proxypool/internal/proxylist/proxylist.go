// Package proxylist parses the operator's proxy list: one proxy per line,
// either host:port (an HTTP proxy) or scheme://[user:pass@]host:port with
// scheme http, https or socks5. Blank lines and lines starting with '#' are
// ignored, as is a trailing comment after whitespace.
//
// Credentials stay inside Entry: only URL returns them. ID, Addr and String
// never do, so an Entry can be logged.
package proxylist

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Supported schemes.
const (
	HTTP   = "http"
	HTTPS  = "https"
	SOCKS5 = "socks5"
)

// maxLineBytes bounds one line of the file.
const maxLineBytes = 64 << 10

// Entry is one proxy.
type Entry struct {
	Scheme   string // http, https or socks5
	Host     string // lower-cased host name or IP (IPv6 without brackets)
	Port     int
	Username string // empty without credentials
	Password string
	HasUser  bool // userinfo present (a user with an empty password is valid)
}

// ID returns the stable id of the proxy: a hash of scheme, host and port, so
// it never contains credentials and does not change when they rotate.
func (e Entry) ID() string {
	sum := sha256.Sum256([]byte(e.Scheme + "://" + e.Addr()))
	return hex.EncodeToString(sum[:8])
}

// Addr returns host:port.
func (e Entry) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// String returns scheme://host:port, without credentials.
func (e Entry) String() string { return e.Scheme + "://" + e.Addr() }

// GoString keeps %#v from printing credentials.
func (e Entry) GoString() string { return "proxylist.Entry(" + e.String() + ")" }

// URL returns scheme://[user:pass@]host:port, credentials included: for the
// client that dials the proxy, never for logs.
func (e Entry) URL() string {
	u := url.URL{Scheme: e.Scheme, Host: e.Addr()}
	if e.HasUser {
		u.User = url.UserPassword(e.Username, e.Password)
	}
	return u.String()
}

// LineError reports an invalid line. Its message never quotes the line,
// which may hold a password.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Static parse failures.
var (
	ErrScheme = errors.New("unsupported scheme (want http, https or socks5)")
	ErrPort   = errors.New("invalid or missing port")
	ErrHost   = errors.New("invalid or missing host")
	ErrSyntax = errors.New("malformed proxy address")
	ErrLong   = errors.New("line too long")
)

// Parse reads a proxy list. It returns the valid entries in file order
// (a later line with the id of an earlier one is dropped) and, when some
// lines are invalid, an error joining one *LineError per invalid line.
func Parse(r io.Reader) ([]Entry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	var (
		entries []Entry
		errs    []error
		seen    = make(map[string]bool)
		n       int
	)
	for sc.Scan() {
		n++
		e, ok, err := ParseLine(sc.Text())
		switch {
		case err != nil:
			errs = append(errs, &LineError{Line: n, Err: err})
		case ok && !seen[e.ID()]:
			seen[e.ID()] = true
			entries = append(entries, e)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			errs = append(errs, &LineError{Line: n + 1, Err: ErrLong})
		} else {
			errs = append(errs, fmt.Errorf("read proxy list: %w", err))
		}
	}
	return entries, errors.Join(errs...)
}

// ParseLine parses one line. ok is false for blank and comment lines.
func ParseLine(line string) (e Entry, ok bool, err error) {
	s := strings.TrimSpace(line)
	if s == "" || strings.HasPrefix(s, "#") {
		return Entry{}, false, nil
	}
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		if rest := strings.TrimSpace(s[i:]); !strings.HasPrefix(rest, "#") {
			return Entry{}, false, ErrSyntax
		}
		s = s[:i]
	}
	if !strings.Contains(s, "://") {
		e, err = parseHostPort(s)
		if err != nil {
			return Entry{}, false, err
		}
		e.Scheme = HTTP
		return e, true, nil
	}
	e, err = parseURL(s)
	if err != nil {
		return Entry{}, false, err
	}
	return e, true, nil
}

func parseURL(s string) (Entry, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Entry{}, ErrSyntax // url errors quote the input, which may hold a password
	}
	scheme := strings.ToLower(u.Scheme)
	switch scheme {
	case HTTP, HTTPS, SOCKS5:
	default:
		return Entry{}, ErrScheme
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return Entry{}, ErrSyntax
	}
	e, err := parseHostPort(u.Host)
	if err != nil {
		return Entry{}, err
	}
	e.Scheme = scheme
	if u.User != nil {
		e.HasUser = true
		e.Username = u.User.Username()
		e.Password, _ = u.User.Password()
		if e.Username == "" {
			return Entry{}, ErrSyntax
		}
	}
	return e, nil
}

func parseHostPort(s string) (Entry, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return Entry{}, ErrSyntax
		}
		return Entry{}, ErrPort
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 || strings.HasPrefix(port, "+") {
		return Entry{}, ErrPort
	}
	if !validHost(host) {
		return Entry{}, ErrHost
	}
	return Entry{Host: strings.ToLower(host), Port: p}, nil
}

// validHost accepts an IP address or a DNS name (letters, digits, '-', '.',
// '_'), nothing that could smuggle userinfo, paths or ports.
func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if net.ParseIP(h) != nil {
		return true
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return !strings.HasPrefix(h, ".") && !strings.Contains(h, "..")
}
