// Package harvest collects candidate proxies from the configured sources:
// plain host:port lists, JSON lists, and HTML pages that list proxies in
// tables (the proxy-list web sites the seed scrapes). Parsing is pure and
// lenient: a source is untrusted input, unusable entries are skipped and
// counted, never fatal.
package harvest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// Formats of a source body.
const (
	FormatPlain = "plain"
	FormatJSON  = "json"
	FormatHTML  = "html"
)

// MaxBody bounds one source body.
const MaxBody = 8 << 20

// Detect guesses a body's format: JSON when it starts with '[' or '{',
// HTML when it holds a <table or <html tag, else plain lines.
func Detect(body []byte) string {
	t := bytes.TrimSpace(bytes.TrimPrefix(body, []byte("\uFEFF")))
	switch {
	case len(t) > 0 && (t[0] == '[' || t[0] == '{'):
		return FormatJSON
	}
	head := bytes.ToLower(t[:min(len(t), 64<<10)])
	if bytes.Contains(head, []byte("<table")) || bytes.Contains(head, []byte("<html")) {
		return FormatHTML
	}
	return FormatPlain
}

// Parse extracts proxies from body in format (Detect when empty). It
// returns the entries, deduplicated in order, and how many candidate
// entries were unusable.
func Parse(format string, body []byte) ([]proxylist.Entry, int, error) {
	if format == "" {
		format = Detect(body)
	}
	var (
		cands   []string
		skipped int
		err     error
	)
	switch format {
	case FormatPlain:
		cands = parsePlain(body)
	case FormatJSON:
		cands, skipped, err = parseJSON(body)
	case FormatHTML:
		cands, err = parseHTML(body)
	default:
		return nil, 0, fmt.Errorf("unknown source format %q", format)
	}
	if err != nil {
		return nil, 0, err
	}
	seen := make(map[string]bool)
	var out []proxylist.Entry
	for _, c := range cands {
		e, ok, perr := proxylist.ParseLine(c)
		if perr != nil || !ok {
			skipped++
			continue
		}
		if seen[e.ID()] {
			continue
		}
		seen[e.ID()] = true
		out = append(out, e)
	}
	return out, skipped, nil
}

func parsePlain(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// "host:port", possibly followed by columns (country, type…).
		out = append(out, strings.Fields(line)[0])
	}
	return out
}

// parseJSON accepts ["host:port", …], [{"ip"|"host"|"address": …, "port":
// …, "protocol"|"type"|"scheme": …}, …], and either under a top-level
// "data", "proxies" or "items" key.
func parseJSON(body []byte) ([]string, int, error) {
	var raw any
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, 0, fmt.Errorf("parse json source: %w", err)
	}
	if obj, ok := raw.(map[string]any); ok {
		for _, k := range []string{"data", "proxies", "items", "list"} {
			if v, ok := obj[k]; ok {
				raw = v
				break
			}
		}
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, 0, errors.New("parse json source: no list of proxies")
	}
	var (
		out     []string
		skipped int
	)
	for _, item := range list {
		switch v := item.(type) {
		case string:
			out = append(out, strings.TrimSpace(v))
		case map[string]any:
			host := firstString(v, "ip", "host", "address", "addr")
			port := firstString(v, "port")
			scheme := strings.ToLower(firstString(v, "protocol", "type", "scheme"))
			if host == "" {
				skipped++
				continue
			}
			if port != "" {
				host = net.JoinHostPort(strings.Trim(host, "[]"), port)
			}
			out = append(out, withScheme(scheme, host))
		default:
			skipped++
		}
	}
	return out, skipped, nil
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		switch v := m[k].(type) {
		case string:
			if v != "" {
				return strings.TrimSpace(v)
			}
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64)
		case []any: // "protocols": ["http"]
			if len(v) > 0 {
				if s, ok := v[0].(string); ok {
					return s
				}
			}
		}
	}
	return ""
}

// withScheme prefixes hostport with a known proxy scheme; unknown ones
// (socks4) make the entry unusable on purpose.
func withScheme(scheme, hostport string) string {
	switch scheme {
	case "", "http":
		return hostport
	case "https", "socks5":
		return scheme + "://" + hostport
	}
	return scheme + "://" + hostport // rejected by proxylist
}

// parseHTML reads every table: columns are found by header text (IP,
// address or host; port; type or protocol; https "yes"), and rows without
// headers are scanned for an IP cell followed by a port cell, or a
// host:port cell.
func parseHTML(body []byte) ([]string, error) {
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse html source: %w", err)
	}
	var out []string
	doc.Find("table").Each(func(_ int, table *goquery.Selection) {
		ipCol, portCol, typeCol, httpsCol := -1, -1, -1, -1
		table.Find("tr").Each(func(_ int, tr *goquery.Selection) {
			var cells []string
			header := false
			tr.Children().Each(func(_ int, c *goquery.Selection) {
				if goquery.NodeName(c) == "th" {
					header = true
				}
				cells = append(cells, strings.TrimSpace(c.Text()))
			})
			if header {
				for i, h := range cells {
					switch h = strings.ToLower(h); {
					case ipCol < 0 && isIPHeader(h):
						ipCol = i
					case portCol < 0 && strings.Contains(h, "port"):
						portCol = i
					case typeCol < 0 && (strings.Contains(h, "type") || strings.Contains(h, "protocol")):
						typeCol = i
					case httpsCol < 0 && strings.Contains(h, "https"):
						httpsCol = i
					}
				}
				return
			}
			if ipCol >= 0 && portCol >= 0 && ipCol < len(cells) && portCol < len(cells) {
				scheme := ""
				if typeCol >= 0 && typeCol < len(cells) {
					scheme = strings.ToLower(strings.Fields(cells[typeCol] + " ")[0])
				}
				if httpsCol >= 0 && httpsCol < len(cells) && strings.EqualFold(cells[httpsCol], "yes") && scheme == "" {
					scheme = "http" // an HTTP proxy that tunnels https
				}
				out = append(out, withScheme(scheme, net.JoinHostPort(cells[ipCol], cells[portCol])))
				return
			}
			for i, c := range cells {
				if net.ParseIP(c) != nil && i+1 < len(cells) {
					if _, err := strconv.ParseUint(cells[i+1], 10, 16); err == nil {
						out = append(out, net.JoinHostPort(c, cells[i+1]))
						return
					}
				}
				if h, p, err := net.SplitHostPort(c); err == nil && net.ParseIP(h) != nil && p != "" {
					out = append(out, c)
					return
				}
			}
		})
	})
	return out, nil
}

// isIPHeader reports whether a lower-cased header names the address
// column: a word "ip" ("IP", "IP Address", "Proxy IP"), "address" or
// "host" — not a word merely containing the letters ("Description").
func isIPHeader(h string) bool {
	for _, w := range strings.FieldsFunc(h, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) {
		switch w {
		case "ip", "ipv4", "address", "host":
			return true
		}
	}
	return false
}

// Harvester reads the configured sources. Safe for concurrent use.
type Harvester struct {
	sources []string
	client  *http.Client
}

// New returns a harvester of sources: http(s) URLs or file paths.
func New(sources []string, timeout time.Duration) *Harvester {
	return &Harvester{sources: sources, client: &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}}
}

// Result is one source's harvest.
type Result struct {
	Source  string
	Entries []proxylist.Entry
	Skipped int
	Err     error
}

// Harvest reads every source; a failing source is reported in its Result
// and does not stop the others.
func (h *Harvester) Harvest(ctx context.Context) []Result {
	out := make([]Result, 0, len(h.sources))
	for _, src := range h.sources {
		r := Result{Source: src}
		body, err := h.read(ctx, src)
		if err == nil {
			r.Entries, r.Skipped, err = Parse("", body)
		}
		r.Err = err
		out = append(out, r)
	}
	return out
}

func (h *Harvester) read(ctx context.Context, src string) ([]byte, error) {
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		f, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("open source: %w", err)
		}
		defer func() { _ = f.Close() }() // read only
		return readCapped(f)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, fmt.Errorf("build source request: %w", err)
	}
	req.Header.Set("User-Agent", "trawl-proxypool/1")
	resp, err := h.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch source: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch source: status %d", resp.StatusCode)
	}
	return readCapped(resp.Body)
}

func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("read source: %w", err)
	}
	if len(b) > MaxBody {
		return nil, fmt.Errorf("read source: over %d bytes", MaxBody)
	}
	return b, nil
}
