package warc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// The records of a page's rendering (the fetcher's --render): what the
// headless browser fetched while it built the page from its fetched body,
// archived as Browsertrix archives a browser session (ordinary request and
// response records, with its WARC-Page-ID and WARC-Resource-Type fields).

// Browsertrix's fields (gowarc knows them).
const (
	pageIDField       = "WARC-Page-ID"
	resourceTypeField = "WARC-Resource-Type"
)

// renderPages bounds the page ids of renderings remembered until their
// page's own fetch is archived (Archive, right after ArchiveRender): one
// per page in flight is enough.
const renderPages = 4096

// domPrefix makes the target URI of the resource record of a page's
// rendered DOM ("urn:dom:" and the page's URL), as Browsertrix names its
// records about a page (urn:pageinfo:, urn:text:): a replay of the page's
// URL finds its response, not the DOM.
const domPrefix = "urn:dom:"

// ArchiveRender writes the records of the rendering of req's page, fetched
// as res and loaded in a browser as page, into the crawl's file; the
// page's own records are Archive's, next (res.Exchange nil: the page is not
// archived, nor its rendering):
//
//   - per exchange of page other than the page's document (its scripts,
//     styles, XHR and fetch requests; blocked requests have none), a
//     request and a response record, WARC-Concurrent-To each other; a
//     complete 2xx payload already archived is a revisit record
//     (identical-payload-digest), as a fetch's is;
//   - the DOM as the load left it (page.HTML, when not empty), a resource
//     record of urn:dom:<page> (text/html);
//   - a metadata record of the page (application/warc-fields): the crawl,
//     the load's outcome and duration, its requests and blocked requests
//     by reason, and each exchange archived.
//
// Every record carries the page's WARC-Page-ID, and so do the page's own
// records (Archive) once these are written; an exchange's records carry
// its WARC-Resource-Type (Chromium's resource type, lower-cased: script,
// xhr, fetch, stylesheet, …). The records are dated when the load began
// (as the fetch ended; the browser does not time each request), the DOM
// and metadata when it ended.
//
// A body is archived as the page got it, decoded of its content coding
// and cut at the browser's cap: the response's Content-Encoding and
// Transfer-Encoding lines are kept as X-Crawler-Content-Encoding and
// X-Crawler-Transfer-Encoding (as StormCrawler writes a decoded body),
// a Content-Length that is not the body's as X-Crawler-Content-Length,
// and Content-Length is the body's length; a body cut short is
// WARC-Truncated: length. A request record holds the request line and
// headers only (the browser does not report request bodies).
//
// Each exchange is one write (the encoder holds one exchange at a time,
// not the whole page), the DOM and metadata a last one; a crash before the
// last loses the rendering's records, as recovery cuts a file after its
// last metadata record. A rendering with nothing to archive (no exchange,
// no DOM) and one of a deleted crawl write nothing. Blocks until the
// records are written (with Options.Fsync, on disk); safe for concurrent
// use.
func (w *Writer) ArchiveRender(_ context.Context, req *crawlv1.FetchRequest, res *httpfetch.Response, page *browser.Page) error {
	if page == nil || res == nil || res.Exchange == nil {
		return nil
	}
	exs := subresources(req.GetUrl(), page)
	if len(exs) == 0 && page.HTML == "" {
		return nil
	}
	var written []string
	gowarcMu.Lock()
	pageID, err := w.writeRender(req, res, page, exs, &written)
	gowarcMu.Unlock()
	for _, typ := range written {
		w.m.records.WithLabelValues(typ).Inc()
	}
	if err != nil {
		w.m.renderErrors.Inc()
		return err
	}
	if pageID != "" {
		w.pages.put(attemptKey(req), pageID)
	}
	return nil
}

// subresource is an exchange of a page load to archive, and its URL.
type subresource struct {
	ex *browser.Exchange
	u  *url.URL
}

// subresources returns the exchanges of page to archive: those with an
// HTTP status and an http(s) URL, but the page's own document (archived
// as fetched).
func subresources(pageURL string, page *browser.Page) []subresource {
	var out []subresource
	for i := range page.Exchanges {
		ex := &page.Exchanges[i]
		if ex.Status <= 0 || (ex.ResourceType == "Document" && ex.URL == pageURL) {
			continue
		}
		u, err := url.Parse(ex.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			continue
		}
		out = append(out, subresource{ex: ex, u: u})
	}
	return out
}

// writeRender writes the records of a rendering (ArchiveRender) and
// returns its page id ("" when its crawl is deleted: nothing written),
// appending the type of each record written to written. The caller holds
// gowarcMu.
func (w *Writer) writeRender(req *crawlv1.FetchRequest, res *httpfetch.Response, page *browser.Page, exs []subresource,
	written *[]string,
) (string, error) {
	if w.stopping.Load() {
		return "", errors.New("archive rendering: writer closed")
	}
	crawl := req.GetCrawlId()
	if w.deleted[crawl] {
		return "", nil // its page is not archived either (Archive)
	}
	id := w.enc.newID()
	pageID := id[len("<urn:uuid:") : len(id)-1] // a bare UUID, as Browsertrix's
	start := res.Start.Add(res.Duration)
	date, end := warcDate(start), warcDate(start.Add(page.Duration))
	cf := w.fileFor(crawl)
	// The payloads of the rendering, remembered for later revisits once
	// its last write made its records whole (a failed write cuts them
	// off); its own later exchanges may refer to them at once.
	digests := map[string]revisitTarget{}
	for _, s := range exs {
		recs, c, digest := w.exchangeRecords(s, date, pageID, digests)
		if err := w.writeIndexed(cf, recs, written, c); err != nil {
			return "", err
		}
		if digest != "" {
			rec := recs[c.i]
			digests[digest] = revisitTarget{id: rec.id, uri: rec.uri, date: rec.date}
		}
	}
	var recs []*record
	var caps []capture
	if page.HTML != "" {
		dom := []byte(page.HTML)
		recs = append(recs, &record{typ: "resource", uri: domPrefix + req.GetUrl(), date: end, id: w.enc.newID(),
			contentType: "text/html; charset=utf-8", parts: [][]byte{dom}, payloadDigest: w.enc.digest(dom), blockIsPayload: true,
			fields: []field{{pageIDField, pageID}, {resourceTypeField, "dom"}}})
		caps = append(caps, capture{i: 0, mime: "text/html"})
	}
	recs = append(recs, &record{typ: "metadata", uri: req.GetUrl(), date: end, id: w.enc.newID(), contentType: warcFieldsType,
		fields: []field{{pageIDField, pageID}}, parts: [][]byte{w.renderBlock(req, page, exs)}})
	if err := w.writeIndexed(cf, recs, written, caps...); err != nil {
		return "", err
	}
	for digest, t := range digests {
		w.digests.put(digest, t)
	}
	if cf.size >= w.opts.MaxFileSize {
		w.closeFile(cf) // full: the crawl's next write opens a new file
	}
	return pageID, nil
}

// writeIndexed writes recs to cf's file (write) and indexes them with
// their captures caps, appending their types to written. The caller holds
// gowarcMu.
func (w *Writer) writeIndexed(cf *crawlFile, recs []*record, written *[]string, caps ...capture) error {
	offs, err := w.write(cf, recs)
	if err != nil {
		return err
	}
	w.index(cf, recs, offs, caps...)
	for _, r := range recs {
		*written = append(*written, r.typ)
	}
	return nil
}

// exchangeRecords builds the request and response (or revisit) records of
// the exchange s, dated date, of the page pageID, and returns them with
// the response's capture and the payload digest to remember ("" for none).
// A payload archived already, by an earlier fetch or by the rendering
// (own), makes a revisit. The caller holds gowarcMu (w.enc).
func (w *Writer) exchangeRecords(s subresource, date, pageID string, own map[string]revisitTarget) (recs []*record, c capture, digest string) {
	ex := s.ex
	typ := strings.ToLower(ex.ResourceType)
	req := &record{typ: "request", uri: ex.URL, date: date, id: w.enc.newID(), contentType: httpRequestType,
		parts: [][]byte{browserRequestBlock(s)}, payloadDigest: emptyDigest,
		fields: []field{{pageIDField, pageID}, {resourceTypeField, typ}}}
	hdr := browserResponseHeader(ex)
	rec := &record{typ: "response", uri: ex.URL, date: date, id: w.enc.newID(), contentType: httpResponseType,
		payloadDigest: w.enc.digest(ex.Body), fields: []field{{pageIDField, pageID}, {resourceTypeField, typ}}}
	c = capture{i: 1, status: strconv.Itoa(ex.Status), mime: mediaType(ex.Header.Get("Content-Type"))}
	if ex.Status >= 200 && ex.Status < 300 && len(ex.Body) > 0 && !ex.Truncated {
		digest = rec.payloadDigest
		revisit := w.identicalPayload(digest)
		if t, ok := own[digest]; ok {
			revisit = identicalTo(t)
		}
		if revisit != nil {
			// The HTTP header only (WARC-Truncated: length, as a fetch's
			// revisit).
			rec.typ = "revisit"
			rec.fields = append(append(rec.fields, revisit...), field{"WARC-Truncated", "length"})
			rec.parts = [][]byte{hdr}
			c.mime = "warc/revisit"
			return []*record{req, rec}, c, ""
		}
	}
	if ex.Truncated {
		rec.fields = append(rec.fields, field{"WARC-Truncated", "length"})
	}
	rec.parts = [][]byte{hdr, ex.Body}
	return []*record{req, rec}, c, digest
}

// browserRequestBlock is the request of s as the browser made it, in
// HTTP/1.1 form, without a body (the browser does not report it).
func browserRequestBlock(s subresource) []byte {
	method := s.ex.Method
	if method == "" {
		method = http.MethodGet
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, s.u.RequestURI(), s.u.Host)
	_ = httpFields(s.ex.RequestHeaders, "Host").Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// browserResponseHeader is the status line and header of ex's response
// for its body as the browser got it (ArchiveRender): the body is decoded
// of its content and transfer codings, which are kept as X-Crawler-*
// lines, and Content-Length is its length.
func browserResponseHeader(ex *browser.Exchange) []byte {
	text := ex.StatusText
	if text == "" { // HTTP/2 has none
		text = http.StatusText(ex.Status)
	}
	h := httpFields(ex.Header)
	n := strconv.Itoa(len(ex.Body))
	for _, name := range []string{"Content-Encoding", "Transfer-Encoding"} {
		if v := h.Values(name); len(v) > 0 {
			h["X-Crawler-"+name] = v
			h.Del(name)
		}
	}
	if v := h.Values("Content-Length"); len(v) > 0 && (len(v) > 1 || v[0] != n) {
		h["X-Crawler-Content-Length"] = v
	}
	h.Set("Content-Length", n)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", ex.Status, text)
	_ = h.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// httpFields is a copy of h without the names drop, nor HTTP/2
// pseudo-headers (":status"), which no HTTP/1.1 header holds.
func httpFields(h http.Header, drop ...string) http.Header {
	out := make(http.Header, len(h))
	for name, v := range h {
		if name == "" || strings.HasPrefix(name, ":") || slices.Contains(drop, http.CanonicalHeaderKey(name)) {
			continue
		}
		out[http.CanonicalHeaderKey(name)] = slices.Clone(v)
	}
	return out
}

// renderBlock is the block of a rendering's metadata record
// (application/warc-fields): the crawl, how the load went and what it
// fetched.
func (w *Writer) renderBlock(req *crawlv1.FetchRequest, page *browser.Page, exs []subresource) []byte {
	var b []byte
	field := func(k, v string) { b = appendWarcField(b, k, v) }
	field("crawl-id", req.GetCrawlId())
	field("attempt", strconv.Itoa(int(req.GetAttempt())))
	field("fetcher", w.opts.Instance)
	field("renderOutcome", string(page.Outcome))
	field("renderTimeMs", strconv.FormatInt(page.Duration.Milliseconds(), 10))
	if page.FinalURL != req.GetUrl() {
		field("finalURL", page.FinalURL)
	}
	field("title", page.Title)
	field("error", page.Error)
	field("requests", strconv.Itoa(page.Requests))
	reasons := make([]string, 0, len(page.Blocked))
	for r := range page.Blocked {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		field("blocked-"+r, strconv.Itoa(page.Blocked[r]))
	}
	if page.Dialogs > 0 {
		field("dialogs", strconv.Itoa(page.Dialogs))
	}
	for _, s := range exs {
		field("subresource", fmt.Sprintf("%d %s %s", s.ex.Status, strings.ToLower(s.ex.ResourceType), s.ex.URL))
	}
	return b
}
