package consume

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/warc"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// renderUA is the browser's user agent in TestRenderWARC.
const renderUA = "trawl-render-test/1.0"

// galleryCSS is the stylesheet of /gallery, sent gzip-coded.
const galleryCSS = "p { color: #333; }\n"

// gallerySite is scriptSite with /gallery, a script-built page (its text
// written by /app.js from /data/1.json) that also asks for a stylesheet
// sent gzip-coded, an image and a script of another host (other).
func gallerySite(other string) *http.ServeMux {
	mux := scriptSite()
	mux.HandleFunc("/gallery", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!DOCTYPE html><html><head><title>Gallery</title><link rel="stylesheet" href="/style.css"></head>` +
			`<body><div id="app"></div><img src="/logo.png" alt="">` +
			`<script src="` + other + `/lib.js"></script><script src="/app.js"></script>` +
			`<noscript>Please enable JavaScript</noscript></body></html>`))
	})
	mux.HandleFunc("/style.css", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = zw.Write([]byte(galleryCSS))
		_ = zw.Close()
	})
	mux.HandleFunc("/logo.png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n"))
	})
	return mux
}

// warcRecord is a record read back with gowarc.
type warcRecord struct {
	typ, uri, id, pageID, resourceType string
	concurrent                         []string
	status                             int
	header                             http.Header // of an HTTP message
	line                               string      // HTTP request target
	payload                            []byte      // of an HTTP message, or a resource's or metadata's block
}

// readWarcs reads every record of the WARC files in dir with gowarc,
// every digest validated.
func readWarcs(t *testing.T, dir string) []warcRecord {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if len(files) == 0 {
		t.Fatal("no warc file")
	}
	var out []warcRecord
	for _, path := range files {
		rd, err := gowarc.NewWarcFileReader(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		for rec, err := range rd.Records() {
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(path), err)
			}
			wr := rec.WarcRecord
			if _, err := wr.ValidateDigest(); err != nil {
				t.Fatalf("%s: digest: %v", filepath.Base(path), err)
			}
			h := wr.WarcHeader()
			r := warcRecord{typ: wr.Type().String(), uri: h.Get(gowarc.WarcTargetURI), id: h.Get(gowarc.WarcRecordID),
				pageID: h.Get(gowarc.WarcPageID), resourceType: h.Get(gowarc.WarcResourceType), concurrent: h.GetAll(gowarc.WarcConcurrentTo)}
			var body io.Reader
			switch b := wr.Block().(type) {
			case gowarc.HttpResponseBlock:
				r.status, r.header = b.HttpStatusCode(), *b.HttpHeader()
				body, err = b.PayloadBytes()
			case gowarc.HttpRequestBlock:
				r.line, r.header = b.HttpRequestLine(), *b.HttpHeader()
			default:
				body, err = wr.Block().RawBytes()
			}
			if err != nil {
				t.Fatal(err)
			}
			if body != nil {
				if r.payload, err = io.ReadAll(body); err != nil {
					t.Fatal(err)
				}
			}
			_ = rec.Close()
			out = append(out, r)
		}
		_ = rd.Close()
	}
	return out
}

// TestRenderWARC: with --warc, a page rendered in a real headless
// Chromium is archived with what the browser fetched for it, as
// Browsertrix archives a browser session: a request and a response record
// per subresource (its script, its data fetched by the script, its
// stylesheet, decoded of its gzip coding), concurrent to each other, with
// their target URIs, statuses and bodies as served, its DOM, a metadata
// record of the load, all with the page's WARC-Page-ID, which the page's
// own records (fetch_log points at its response) carry too. The requests
// the browser blocked (an image, another host's script, a request
// robots.txt disallows) are not there. A page not rendered, and every page
// without --render, is archived as before: request, response and metadata
// of its fetch, nothing else. Real broker, ClickHouse and Chromium; the
// files are read back with gowarc, every digest validated.
func TestRenderWARC(t *testing.T) {
	tests := []struct {
		name   string
		render bool
	}{
		{"render auto", true},
		{"no render", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kcfg := kafkatest.Config(t, 1)
			store := chtest.NewStore(t)
			ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
			defer cancel()
			other := startSite(t, "127.0.0.114", scriptSite())
			s := startSite(t, "127.0.0.113", gallerySite(other.base))
			o := Options{Politeness: politeness.Options{Delay: 50 * time.Millisecond}}
			if tt.render {
				b, err := browser.New(context.WithoutCancel(ctx), browser.Options{Tabs: 1, PageTimeout: 20 * time.Second, SettleIdle: 200 * time.Millisecond,
					UserAgent: renderUA})
				if err != nil {
					t.Fatalf("start chromium: %v", err)
				}
				t.Cleanup(func() { _ = b.Close() })
				o.Renderer, o.Render = b, rendersniff.Auto
			}
			dir := t.TempDir()
			log := zaptest.NewLogger(t)
			archive, err := warc.Open(warc.Options{Dir: dir, Instance: "rw"}, nil, log, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			o.Archive = archive
			archCtx, stopArchive := context.WithCancel(context.WithoutCancel(ctx))
			archDone := make(chan error, 1)
			go func() { archDone <- archive.Run(archCtx) }()

			writeRequests(ctx, t, kcfg, s, "rw", map[string]uint64{},
				&crawlv1.FetchRequest{Url: "/gallery"}, &crawlv1.FetchRequest{Url: "/article"})
			p := startFetcher(ctx, t, kcfg, store, "renderwarc", 100, o)
			waitFor(ctx, t, "both pages committed", func() bool {
				lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), kcfg.Topics().Fetch)
				return err == nil && lag == 0
			})
			p.stop(t)
			stopArchive() // closes the files
			if err := <-archDone; err != nil {
				t.Fatal(err)
			}

			recs := readWarcs(t, dir)
			gallery := s.base + "/gallery"
			var got []string
			byKey := map[string]warcRecord{}
			for _, r := range recs {
				if r.typ == "warcinfo" {
					continue
				}
				key := r.typ + " " + strings.TrimPrefix(strings.TrimPrefix(r.uri, "urn:dom:"+s.base), s.base)
				if strings.HasPrefix(r.uri, "urn:dom:") {
					key = r.typ + " dom " + strings.TrimPrefix(r.uri, "urn:dom:"+s.base)
				}
				if r.typ == "metadata" && strings.Contains(string(r.payload), "renderOutcome:") {
					key += " (render)"
				}
				got = append(got, key)
				byKey[key] = r
			}
			slices.Sort(got)
			want := []string{"metadata /article", "metadata /gallery", "request /article", "request /gallery", "response /article", "response /gallery"}
			if tt.render {
				want = append(want, "request /app.js", "response /app.js", "request /data/1.json", "response /data/1.json",
					"request /style.css", "response /style.css", "resource dom /gallery", "metadata /gallery (render)")
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("records (type, target):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, r := range recs {
				for _, blocked := range []string{"/logo.png", "/lib.js", "/data/secret.json"} {
					if strings.HasSuffix(r.uri, blocked) || (r.typ == "metadata" && strings.Contains(string(r.payload), blocked+"\r\n")) {
						t.Errorf("a blocked request is archived: %s %s", r.typ, r.uri)
					}
				}
			}
			// fetch_log points at the page's response, as fetched.
			var file string
			var off uint64
			if err := store.Conn().QueryRow(ctx, "SELECT warc_file, warc_offset FROM fetch_log FINAL WHERE crawl_id = 'rw' AND url = ?",
				gallery).Scan(&file, &off); err != nil {
				t.Fatal(err)
			}
			rd, err := gowarc.NewWarcFileReader(filepath.Join(dir, file), int64(off))
			if err != nil {
				t.Fatal(err)
			}
			rec, err := rd.Next()
			if err != nil {
				t.Fatal(err)
			}
			pageID := rec.WarcRecord.WarcHeader().Get(gowarc.WarcPageID)
			if rec.WarcRecord.Type() != gowarc.Response || rec.WarcRecord.WarcHeader().Get(gowarc.WarcTargetURI) != gallery ||
				rec.WarcRecord.WarcHeader().Get(gowarc.WarcRecordID) != byKey["response /gallery"].id {
				t.Errorf("fetch_log points at %s@%d, a %s of %s", file, off, rec.WarcRecord.Type(), rec.WarcRecord.WarcHeader().Get(gowarc.WarcTargetURI))
			}
			_ = rec.Close()
			_ = rd.Close()
			if !tt.render {
				for _, r := range recs {
					if r.pageID != "" || r.resourceType != "" {
						t.Errorf("%s %s: WARC-Page-ID %q, WARC-Resource-Type %q without --render", r.typ, r.uri, r.pageID, r.resourceType)
					}
				}
				if !strings.Contains(string(byKey["response /gallery"].payload), `<div id="app"></div>`) {
					t.Errorf("the gallery's response is not its body as fetched")
				}
				return
			}
			if pageID == "" {
				t.Fatal("the rendered page's response has no WARC-Page-ID")
			}
			for key, r := range byKey {
				wantID := pageID
				if strings.HasSuffix(key, "/article") {
					wantID = "" // not rendered: as before
				}
				if r.pageID != wantID {
					t.Errorf("%s: WARC-Page-ID %q, want %q", key, r.pageID, wantID)
				}
			}
			// The page as fetched, not as rendered: the DOM has its own
			// record.
			if p := string(byKey["response /gallery"].payload); strings.Contains(p, "Text the script wrote.") || !strings.Contains(p, `<div id="app"></div>`) {
				t.Errorf("the gallery's response is not its body as fetched:\n%s", p)
			}
			if dom := string(byKey["resource dom /gallery"].payload); !strings.Contains(dom, "Text the script wrote.") || !strings.Contains(dom, `<a href="/built/a">`) {
				t.Errorf("the DOM record lacks what the script wrote:\n%s", dom)
			}
			meta := string(byKey["metadata /gallery (render)"].payload)
			for _, want := range []string{"crawl-id: rw\r\n", "renderOutcome: settled\r\n", "blocked-other_host: 1\r\n", "blocked-robots: 1\r\n",
				"blocked-type: ", "subresource: 200 script " + s.base + "/app.js\r\n", "subresource: 200 xhr " + s.base + "/data/1.json\r\n"} {
				if !strings.Contains(meta, want) {
					t.Errorf("the rendering's metadata lacks %q:\n%s", want, meta)
				}
			}
			js := `const d = await (await fetch("/data/1.json")).json();`
			for _, sub := range []struct {
				path, resourceType, contentType, body string
			}{
				{"/app.js", "script", "text/javascript", js},
				{"/data/1.json", "xhr", "application/json", `{"links":["/built/a","/built/b"],"text":"Text the script wrote."}`},
				{"/style.css", "stylesheet", "text/css", galleryCSS},
			} {
				rq, rs := byKey["request "+sub.path], byKey["response "+sub.path]
				if rs.uri != s.base+sub.path || rq.uri != rs.uri {
					t.Errorf("%s: target URIs %q and %q", sub.path, rq.uri, rs.uri)
				}
				if !slices.Contains(rq.concurrent, rs.id) || !slices.Contains(rs.concurrent, rq.id) {
					t.Errorf("%s: request and response not concurrent to each other", sub.path)
				}
				if rq.resourceType != sub.resourceType || rs.resourceType != sub.resourceType {
					t.Errorf("%s: WARC-Resource-Type %q and %q, want %q", sub.path, rq.resourceType, rs.resourceType, sub.resourceType)
				}
				if rq.line != sub.path || rq.header.Get("User-Agent") != renderUA {
					t.Errorf("%s: request line %q, User-Agent %q", sub.path, rq.line, rq.header.Get("User-Agent"))
				}
				if rs.status != http.StatusOK || rs.header.Get("Content-Type") != sub.contentType || !strings.Contains(string(rs.payload), sub.body) {
					t.Errorf("%s: status %d, Content-Type %q, payload %q; want 200, %q, %q", sub.path, rs.status, rs.header.Get("Content-Type"), rs.payload, sub.contentType, sub.body)
				}
			}
			// Decoded as the browser got it: the coding kept aside.
			if css := byKey["response /style.css"]; string(css.payload) != galleryCSS || css.header.Get("Content-Encoding") != "" ||
				css.header.Get("X-Crawler-Content-Encoding") != "gzip" {
				t.Errorf("style.css: payload %q, Content-Encoding %q, X-Crawler-Content-Encoding %q; want the CSS decoded, the coding aside",
					css.payload, css.header.Get("Content-Encoding"), css.header.Get("X-Crawler-Content-Encoding"))
			}
			for _, sp := range []*site{s, other} {
				_, hits := sp.snapshot()
				for _, path := range []string{"/logo.png", "/lib.js", "/data/secret.json"} {
					if hits[path] != 0 {
						t.Errorf("%s asked %d times, blocked", path, hits[path])
					}
				}
			}
		})
	}
}
