package doctext

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// collector gathers what a reader finds, within the limits.
type collector struct {
	base  *url.URL
	lim   Limits
	text  strings.Builder
	full  bool // MaxTextBytes reached
	title string
	props Properties
	links []string
	seen  map[string]bool
	trunc bool
}

func newCollector(base *url.URL, lim Limits) *collector {
	return &collector{base: base, lim: lim, seen: map[string]bool{}}
}

// write adds s to the text; it reports false once the text is full.
func (c *collector) write(s string) bool {
	if c.full {
		return false
	}
	room := c.lim.MaxTextBytes - c.text.Len()
	if len(s) > room {
		// Cut on a rune boundary.
		for room > 0 && !utf8.RuneStart(s[room]) {
			room--
		}
		c.text.WriteString(s[:room])
		c.full, c.trunc = true, true
		return false
	}
	c.text.WriteString(s)
	return true
}

// room is how many bytes of text may still be written.
func (c *collector) room() int { return c.lim.MaxTextBytes - c.text.Len() }

// endBlock ends a paragraph or line: a "\n" unless the text already ends
// one (or is empty).
func (c *collector) endBlock() {
	if n := c.text.Len(); n > 0 && !strings.HasSuffix(c.tail(), "\n") {
		c.write("\n")
	}
}

// endPage ends a page, slide or sheet with a blank line.
func (c *collector) endPage() {
	c.endBlock()
	if c.text.Len() > 0 && !strings.HasSuffix(c.tail(), "\n\n") {
		c.write("\n")
	}
}

// tail returns the last bytes of the text.
func (c *collector) tail() string {
	s := c.text.String()
	return s[max(0, len(s)-2):]
}

// link adds a link, resolved against base; only http(s) URLs are kept.
func (c *collector) link(raw string) {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw[0] == '#' || len(raw) > 4096 || len(c.links) >= 10000 {
		// Empty, a place in the document itself, or past the bounds.
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		return
	}
	if !u.IsAbs() {
		if c.base == nil {
			return
		}
		u = c.base.ResolveReference(u)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return
	}
	s := u.String()
	if !c.seen[s] {
		c.seen[s] = true
		c.links = append(c.links, s)
	}
}

func (c *collector) doc() Doc {
	text := strings.TrimRight(c.text.String(), "\n") // one page break too many
	if text != "" && !c.full {
		text += "\n"
	}
	return Doc{
		Title:      strings.TrimSpace(c.title),
		Text:       text,
		Properties: c.props,
		Links:      c.links,
		Truncated:  c.trunc,
	}
}
