package websim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Script-built sites (Config.ScriptShare): a share of the hosts build
// their pages in the browser, as sites made with React, Vue or Angular
// without server rendering do (issue 36). Every HTML page of such a host
// (the index, the list pages, the articles, the calendar) is a shell:
//
//	<title> the page's title, an empty <div id="app">,
//	<script src="/app.js">, <noscript>Please enable JavaScript</noscript>
//
// /app.js fetches /data/<page>.json (/data/index.json for "/",
// /data/news/2021/story-5.html.json?… for an article: the page's path and
// query) and writes the page's text and links into the DOM: the same text
// and the same <a href> links, in the same order and spelled the same way,
// as the server-rendered page has, so that a crawl covers a script-built
// site as it covers the others once it renders. robots.txt of such a host
// allows /app.js and /data/. Everything else (redirects, 404s, binaries,
// the slow and big pages) is as on the other hosts.

// Kinds of the resources of script-built hosts.
const (
	KindScript = "script" // /app.js
	KindData   = "data"   // /data/<page>.json
)

// appJS builds a page from its data: each block a <p> of text and links.
const appJS = `(async () => {
  const app = document.getElementById("app");
  const page = location.pathname === "/" ? "/index" : location.pathname;
  const res = await fetch("/data" + page + ".json" + location.search);
  if (!res.ok) { app.textContent = "Not found"; return; }
  const data = await res.json();
  for (const block of data.blocks) {
    const p = document.createElement("p");
    for (const run of block) {
      if (run.href === undefined) { p.append(run.text); continue; }
      const a = document.createElement("a");
      a.setAttribute("href", run.href);
      a.textContent = run.text;
      p.append(a);
    }
    app.append(p);
  }
})();
`

// scriptHosts picks the script-built hosts: round(ScriptShare × Hosts) of
// them, drawn from the seed.
func scriptHosts(cfg Config) []bool {
	n := int(math.Round(cfg.ScriptShare * float64(cfg.Hosts)))
	if n == 0 {
		return nil
	}
	out := make([]bool, cfg.Hosts)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5c1de))
	for _, h := range rng.Perm(cfg.Hosts)[:n] {
		out[h] = true
	}
	return out
}

// ScriptBuilt reports whether host h (an index of Hosts) builds its pages
// in the browser.
func (w *Web) ScriptBuilt(h int) bool {
	return h >= 0 && h < len(w.script) && w.script[h]
}

// ScriptBuiltHosts returns host:port of the script-built hosts.
func (w *Web) ScriptBuiltHosts() []string {
	var out []string
	for h := range w.cfg.Hosts {
		if w.ScriptBuilt(h) {
			out = append(out, w.addrs[h])
		}
	}
	return out
}

// serveScriptBuilt answers what a script-built host answers differently
// from the others, and reports false for the rest.
func (w *Web) serveScriptBuilt(h int, rw http.ResponseWriter, r *http.Request, p string) (string, bool) {
	switch {
	case p == "/robots.txt":
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(rw, "User-agent: *\nAllow: /app.js\nAllow: /data/\nDisallow: /private/\n")
		return KindRobots, true
	case p == "/app.js":
		// As a site's bundles are: cacheable, so that a browser asks for
		// the script once, not once a page.
		rw.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		rw.Header().Set("Cache-Control", "public, max-age=3600")
		fmt.Fprint(rw, appJS)
		return KindScript, true
	case strings.HasPrefix(p, "/data/"):
		page, ok := strings.CutSuffix(strings.TrimPrefix(p, "/data"), ".json")
		if page == "/index" {
			page = "/"
		}
		var body []byte
		if ok {
			body, _, ok = w.pageHTML(h, page, r.URL.Query())
		}
		if !ok {
			http.NotFound(rw, r)
			return KindData, true
		}
		data, err := json.Marshal(pageDataOf(body))
		if err != nil {
			http.Error(rw, "encode data: "+err.Error(), http.StatusInternalServerError)
			return KindData, true
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.Header().Set("Content-Length", strconv.Itoa(len(data)))
		_, _ = rw.Write(data)
		return KindData, true
	}
	body, kind, ok := w.pageHTML(h, p, r.URL.Query())
	if !ok {
		return "", false
	}
	writeHTML(rw, "utf-8", shellOf(pageDataOf(body).Title))
	return kind, true
}

// pageHTML returns the server-rendered HTML (in UTF-8) of the page at p
// of host h, and its kind, for the pages a script-built host serves as
// shells; false for any other path.
func (w *Web) pageHTML(h int, p string, q url.Values) ([]byte, string, bool) {
	switch {
	case p == "/":
		return w.index(h), KindIndex, true
	case p == "/list":
		k, err := strconv.Atoi(q.Get("page"))
		if err != nil || k < 1 || k > w.lists() {
			return nil, "", false
		}
		return w.list(h, k), KindList, true
	case strings.HasPrefix(p, "/news/"):
		i, ok := w.articleIndex(p)
		if !ok {
			return nil, "", false
		}
		return w.article(h, i), KindArticle, true
	case strings.HasPrefix(p, "/cal/") && has(w.cfg.TrapEvery, h):
		c, ok := parseMonth(strings.TrimPrefix(p, "/cal/"))
		if !ok {
			return nil, "", false
		}
		return calendar(c, w.cfg.TrapGrid), KindTrap, true
	}
	return nil, "", false
}

// shellOf returns the shell of a page titled title.
func shellOf(title string) []byte {
	return []byte("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html.EscapeString(title) +
		"</title></head>\n<body><div id=\"app\"></div><script src=\"/app.js\"></script>" +
		"<noscript>Please enable JavaScript</noscript></body></html>\n")
}

// pageData is what /data/<page>.json holds: the page's title, and its
// visible text and links in blocks (a paragraph, a list item, a heading).
type pageData struct {
	Title  string  `json:"title"`
	Blocks [][]run `json:"blocks"`
}

// run is a piece of text, or a link when Href is set ("" included:
// Href is a pointer so that an empty href stays a link).
type run struct {
	Text string  `json:"text"`
	Href *string `json:"href,omitempty"`
}

// pageDataOf reads the title, text and links of a page websim generated
// (well-formed, attributes double-quoted): the text outside <head>,
// <script>, <style> and <svg>, in blocks started by block-level elements,
// and each <a href> with its text.
func pageDataOf(page []byte) pageData {
	var (
		d     pageData
		block []run
		link  *run
		skip  string // the element whose content is skipped
	)
	// endBlock ends the block: the spaces around it trimmed, a run left
	// empty dropped.
	endBlock := func() {
		if len(block) == 0 {
			return
		}
		block[0].Text = strings.TrimLeft(block[0].Text, " ")
		block[len(block)-1].Text = strings.TrimRight(block[len(block)-1].Text, " ")
		var kept []run
		for _, r := range block {
			if r.Text != "" || r.Href != nil {
				kept = append(kept, r)
			}
		}
		if len(kept) > 0 {
			d.Blocks = append(d.Blocks, kept)
		}
		block = nil
	}
	for len(page) > 0 {
		lt := bytes.IndexByte(page, '<')
		if lt < 0 {
			lt = len(page)
		}
		if text := page[:lt]; skip == "" && len(text) > 0 {
			s := html.UnescapeString(collapse(string(text)))
			switch {
			case link != nil:
				link.Text += s
			case strings.TrimSpace(s) == "" && len(block) == 0:
			default:
				block = append(block, run{Text: s})
			}
		}
		page = page[lt:]
		gt := bytes.IndexByte(page, '>')
		if gt < 0 {
			break
		}
		tag := string(page[1:gt])
		page = page[gt+1:]
		if strings.HasPrefix(tag, "!") {
			continue // doctype or comment (websim's have no '>' inside)
		}
		name, attrs, _ := strings.Cut(tag, " ")
		name = strings.ToLower(name)
		if end, ok := strings.CutPrefix(name, "/"); ok {
			if end == skip {
				skip = ""
				continue
			}
			if end == "a" && link != nil && skip == "" {
				link.Text = strings.TrimSpace(link.Text)
				block = append(block, *link)
				link = nil
			}
			if blockElement(end) {
				endBlock()
			}
			continue
		}
		if name == "title" {
			if end := bytes.Index(page, []byte("</title>")); end >= 0 {
				d.Title = html.UnescapeString(string(page[:end]))
				page = page[end+len("</title>"):]
			}
			continue
		}
		if skip != "" {
			continue
		}
		switch name {
		case "head", "script", "style", "svg":
			skip = name
		case "a":
			href := attr(attrs, "href")
			link = &run{Href: &href}
		default:
			if blockElement(name) {
				endBlock()
			}
		}
	}
	endBlock()
	return d
}

// collapse replaces each run of white space in s with one space.
func collapse(s string) string {
	var b strings.Builder
	space := false
	for _, c := range s {
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			space = true
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(c)
	}
	if space {
		b.WriteByte(' ')
	}
	return b.String()
}

// attr returns the value of a double-quoted attribute of a tag.
func attr(attrs, name string) string {
	_, rest, ok := strings.Cut(" "+attrs, " "+name+"=\"")
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, "\"")
	return html.UnescapeString(v)
}

// blockElement tells whether an element starts a block of text.
func blockElement(name string) bool {
	switch name {
	case "p", "div", "li", "ul", "ol", "nav", "header", "footer", "main", "article", "aside", "section",
		"h1", "h2", "h3", "h4", "h5", "h6", "br", "tr", "body":
		return true
	}
	return false
}
