package warc

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// fetchedPage is the answer of a fetch of u (path p) with body.
func fetchedPage(p string, body []byte, start time.Time) *httpfetch.Response {
	return &httpfetch.Response{Status: 200, Start: start, Duration: 20 * time.Millisecond, Exchange: &httpfetch.Exchange{
		Method: "GET", RequestURI: p, RequestHost: "render.test", RequestHeader: http.Header{"User-Agent": {"trawl-test"}},
		Proto: "HTTP/1.1", Status: "200 OK", Header: http.Header{"Content-Type": {"text/html"}}, Body: body, BodyRead: true,
	}}
}

// renderedApp is a load of http://render.test/app in a browser, with an
// exchange of each kind the archive must write as the browser got it.
func renderedApp() *browser.Page {
	const page = "http://render.test/app"
	js := []byte(`document.title = "built";`)
	ua := http.Header{"User-Agent": {"trawl-test"}, "Accept": {"*/*"}}
	return &browser.Page{
		URL: page, FinalURL: page, Status: 200, Title: "built", Outcome: browser.OutcomeSettled, Requests: 5,
		HTML:     `<html><head><title>built</title></head><body><p>Text the script wrote.</p></body></html>`,
		Blocked:  map[string]int{browser.BlockedType: 2, browser.BlockedRobots: 1},
		Duration: 300 * time.Millisecond,
		Exchanges: []browser.Exchange{
			// The page's document, fetched already: not archived again.
			{Method: "GET", URL: page, ResourceType: "Document", RequestHeaders: ua, Status: 200, StatusText: "OK",
				Header: http.Header{"Content-Type": {"text/html"}}, Body: []byte("<html></html>")},
			// Sent gzip-coded, decoded by the browser.
			{Method: "GET", URL: "http://render.test/app.js", ResourceType: "Script", RequestHeaders: ua, Status: 200, StatusText: "OK",
				Header: http.Header{"Content-Type": {"text/javascript"}, "Content-Encoding": {"gzip"}, "Content-Length": {"31"}}, Body: js},
			// HTTP/2: no status text, a pseudo-header.
			{Method: "GET", URL: "http://render.test/data/1.json?x=1", ResourceType: "Fetch",
				RequestHeaders: http.Header{"Accept": {"*/*"}, ":authority": {"render.test"}}, Status: 200,
				Header: http.Header{":status": {"200"}, "Content-Type": {"application/json"}}, Body: []byte(`{"text":"Text the script wrote."}`)},
			{Method: "GET", URL: "http://render.test/old.css", ResourceType: "Stylesheet", RequestHeaders: ua, Status: 301, StatusText: "Moved Permanently",
				Header: http.Header{"Location": {"/new.css"}, "Content-Length": {"57"}}},
			{Method: "GET", URL: "http://render.test/big.js", ResourceType: "Script", RequestHeaders: ua, Status: 200, StatusText: "OK",
				Header: http.Header{"Content-Type": {"text/javascript"}}, Body: []byte("var big = 1;"), Truncated: true},
			// The same payload as app.js: a revisit.
			{Method: "GET", URL: "http://render.test/copy.js", ResourceType: "Script", RequestHeaders: ua, Status: 200, StatusText: "OK",
				Header: http.Header{"Content-Type": {"text/javascript"}}, Body: js},
		},
	}
}

// TestArchiveRender: a rendered page's records, before its own: a request
// and a response record per subresource (not the page's document),
// concurrent to each other, the body as the browser got it (decoded: the
// coding and the length as sent kept as X-Crawler-* lines), a revisit for
// a payload archived already, WARC-Truncated for a body cut; its DOM as
// urn:dom:<page>; a metadata record of the load. Every record of the
// rendering and of the page's own fetch has one WARC-Page-ID, and a page
// not rendered none. The file reads back with the spec reader and gowarc
// (every digest verified, spec violations fatal), and its index is the one
// read back. A crash before the rendering's metadata record cuts all of
// it.
func TestArchiveRender(t *testing.T) {
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	w, err := Open(Options{Dir: dir, Instance: "render-1"}, nil, zaptest.NewLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	plain := request("c1", "http://render.test/plain", 0, "")
	if _, _, err := w.Archive(ctx, plain, fetchedPage("/plain", []byte("<html>plain</html>"), start)); err != nil {
		t.Fatal(err)
	}
	app := request("c1", "http://render.test/app", 0, "")
	res := fetchedPage("/app", []byte(`<html><body><div id="app"></div><script src="/app.js"></script></body></html>`), start)
	page := renderedApp()
	if err := w.ArchiveRender(ctx, app, res, page); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Archive(ctx, app, res); err != nil {
		t.Fatal(err)
	}
	// Nothing seen (a load robots.txt refused): nothing written.
	if err := w.ArchiveRender(ctx, request("c1", "http://render.test/none", 0, ""), res, &browser.Page{Outcome: browser.OutcomeRobots}); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	warcs, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(warcs) != 1 {
		t.Fatalf("%d files, want 1", len(warcs))
	}
	recs, err := specRead(warcs[0])
	if err != nil {
		t.Fatalf("spec reader: %v", err)
	}
	var got []string
	for _, r := range recs[1:] {
		got = append(got, r.get("WARC-Type")+" "+r.get("WARC-Target-URI"))
	}
	want := []string{
		"request http://render.test/plain", "response http://render.test/plain", "metadata http://render.test/plain",
		"request http://render.test/app.js", "response http://render.test/app.js",
		"request http://render.test/data/1.json?x=1", "response http://render.test/data/1.json?x=1",
		"request http://render.test/old.css", "response http://render.test/old.css",
		"request http://render.test/big.js", "response http://render.test/big.js",
		"request http://render.test/copy.js", "revisit http://render.test/copy.js",
		"resource urn:dom:http://render.test/app", "metadata http://render.test/app",
		"request http://render.test/app", "response http://render.test/app", "metadata http://render.test/app",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	rendering := recs[4:] // the rendering's and the page's records
	pageID := rendering[0].get("WARC-Page-ID")
	for _, r := range rendering {
		if r.get("WARC-Page-ID") != pageID || pageID == "" {
			t.Errorf("%s %s: WARC-Page-ID %q, want the page's %q", r.get("WARC-Type"), r.get("WARC-Target-URI"), r.get("WARC-Page-ID"), pageID)
		}
	}
	for _, r := range recs[1:4] {
		if r.get("WARC-Page-ID") != "" {
			t.Errorf("%s of a page not rendered has WARC-Page-ID %q", r.get("WARC-Type"), r.get("WARC-Page-ID"))
		}
	}
	for i := 0; i < 10; i += 2 { // the exchanges' pairs
		rq, rs := rendering[i], rendering[i+1]
		if rq.get("WARC-Concurrent-To") != rs.get("WARC-Record-ID") || rs.get("WARC-Concurrent-To") != rq.get("WARC-Record-ID") {
			t.Errorf("%s: request and response not concurrent to each other", rq.get("WARC-Target-URI"))
		}
		if rq.get("WARC-Resource-Type") == "" || rq.get("WARC-Resource-Type") != rs.get("WARC-Resource-Type") {
			t.Errorf("%s: WARC-Resource-Type %q and %q", rq.get("WARC-Target-URI"), rq.get("WARC-Resource-Type"), rs.get("WARC-Resource-Type"))
		}
	}
	byURI := map[string]specRecord{}
	for _, r := range rendering[:10] {
		byURI[r.get("WARC-Type")+" "+strings.TrimPrefix(r.get("WARC-Target-URI"), "http://render.test")] = r
	}
	js := page.Exchanges[1].Body
	tests := []struct {
		name, record string
		typ          string // WARC-Resource-Type
		payload      []byte // nil: not checked
		has, lacks   []string
		truncated    string
	}{
		{name: "coded script", record: "response /app.js", typ: "script", payload: js,
			has:   []string{"HTTP/1.1 200 OK\r\n", "X-Crawler-Content-Encoding: gzip\r\n", "X-Crawler-Content-Length: 31\r\n", "Content-Length: 25\r\n"},
			lacks: []string{"\r\nContent-Encoding:"}},
		{name: "request", record: "request /app.js", typ: "script",
			has: []string{"GET /app.js HTTP/1.1\r\nHost: render.test\r\n", "User-Agent: trawl-test\r\n"}},
		{name: "http/2 fetch", record: "response /data/1.json?x=1", typ: "fetch", payload: page.Exchanges[2].Body,
			has: []string{"HTTP/1.1 200 OK\r\n"}, lacks: []string{":status", "X-Crawler-Content-Length"}},
		{name: "http/2 request", record: "request /data/1.json?x=1", typ: "fetch",
			has: []string{"GET /data/1.json?x=1 HTTP/1.1\r\nHost: render.test\r\n"}, lacks: []string{":authority"}},
		{name: "redirect", record: "response /old.css", typ: "stylesheet", payload: []byte{},
			has: []string{"HTTP/1.1 301 Moved Permanently\r\n", "Location: /new.css\r\n", "Content-Length: 0\r\n", "X-Crawler-Content-Length: 57\r\n"}},
		{name: "cut", record: "response /big.js", typ: "script", payload: []byte("var big = 1;"), truncated: "length"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := byURI[tt.record]
			if !ok {
				t.Fatalf("no %s record", tt.record)
			}
			if r.get("WARC-Resource-Type") != tt.typ || r.get("WARC-Truncated") != tt.truncated {
				t.Errorf("WARC-Resource-Type %q, WARC-Truncated %q; want %q, %q", r.get("WARC-Resource-Type"), r.get("WARC-Truncated"), tt.typ, tt.truncated)
			}
			if p, _ := specPayload(r); tt.payload != nil && !bytes.Equal(p, tt.payload) {
				t.Errorf("payload %q, want %q", p, tt.payload)
			}
			for _, s := range tt.has {
				if !bytes.Contains(r.block, []byte(s)) {
					t.Errorf("block lacks %q:\n%s", s, r.block)
				}
			}
			for _, s := range tt.lacks {
				if bytes.Contains(r.block, []byte(s)) {
					t.Errorf("block has %q:\n%s", s, r.block)
				}
			}
		})
	}
	if r := byURI["revisit /copy.js"]; r.get("WARC-Profile") != gowarc.ProfileIdenticalPayloadDigestV1_1 ||
		r.get("WARC-Refers-To-Target-URI") != "http://render.test/app.js" || r.get("WARC-Refers-To") != byURI["response /app.js"].get("WARC-Record-ID") {
		t.Errorf("copy.js: %s %q refers to %q", r.get("WARC-Type"), r.get("WARC-Profile"), r.get("WARC-Refers-To-Target-URI"))
	}
	if dom := rendering[10]; string(dom.block) != page.HTML || dom.get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("dom: %s, %q", dom.get("Content-Type"), dom.block)
	}
	meta := string(rendering[11].block)
	for _, s := range []string{"crawl-id: c1\r\n", "renderOutcome: settled\r\n", "renderTimeMs: 300\r\n", "requests: 5\r\n",
		"blocked-robots: 1\r\nblocked-type: 2\r\n", "subresource: 200 script http://render.test/app.js\r\n", "subresource: 301 stylesheet http://render.test/old.css\r\n"} {
		if !strings.Contains(meta, s) {
			t.Errorf("the rendering's metadata lacks %q:\n%s", s, meta)
		}
	}

	// gowarc reads it all, spec violations fatal, every digest valid.
	if n := readStrict(t, warcs[0], nil); n != len(recs) {
		t.Errorf("gowarc read %d records, the spec reader %d", n, len(recs))
	}
	checkIndexes(t, nil, "", warcs)
	for typ, want := range map[string]float64{"request": 7, "response": 6, "revisit": 1, "resource": 1, "metadata": 3} {
		if got := testutil.ToFloat64(w.m.records.WithLabelValues(typ)); got != want {
			t.Errorf("records_total{type=%s} = %v, want %v", typ, got, want)
		}
	}

	// A crash before the rendering's metadata record: recovery keeps
	// the plain page only.
	data, err := os.ReadFile(warcs[0])
	if err != nil {
		t.Fatal(err)
	}
	crashed := t.TempDir()
	name := filepath.Join(crashed, filepath.Base(warcs[0]))
	if err := os.WriteFile(name+openSuffix, data[:rendering[11].offset], 0o644); err != nil {
		t.Fatal(err)
	}
	w2, err := Open(Options{Dir: crashed, Instance: "render-2"}, nil, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	w2.Release()
	kept, err := specRead(name)
	if err != nil || len(kept) != 4 {
		t.Fatalf("recovered file: %d records (%v), want the warcinfo and the plain page's 3", len(kept), err)
	}
}
