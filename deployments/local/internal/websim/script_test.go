package websim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// hostPages fetches every kind of resource of host h of w (robots.txt,
// the index, every list page and article, the calendar's entry, a
// redirect, a 404, a binary, a private page) and returns their bodies and
// redirect targets, the web's port written "PORT".
func hostPages(t *testing.T, w *Web, h int) map[string]string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	base := "http://" + w.Hosts()[h]
	paths := []string{"/robots.txt", "/", "/cal/2026/11", "/r/0", "/r/0/hop", "/gone/0", "/files/report-0.pdf", "/private/0"}
	for k := 1; k <= w.lists(); k++ {
		paths = append(paths, fmt.Sprintf("/list?page=%d", k))
	}
	for i := range w.cfg.Articles {
		paths = append(paths, w.articlePath(i))
	}
	port := ":" + strconv.Itoa(w.port)
	out := map[string]string{}
	for _, p := range paths {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%d %s %s\n", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"))
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		resp.Body.Close()
		out[p] = strings.ReplaceAll(b.String(), port, ":PORT")
	}
	return out
}

func hashPages(pages map[string]string) string {
	keys := make([]string, 0, len(pages))
	for k := range pages {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s\x00%s\x00", k, pages[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// goldenServerRendered is hashPages over hosts 0-29 of a web of 30
// hosts, 20 articles, seed 7, as the code before script-built sites served
// it (commit 9540a0e): the server-rendered web must not change.
const goldenServerRendered = "9213d4ea3a3bfb10334c07be5d869ac684c4a91ded93defd671016ccbc669543"

// TestServerRenderedUnchanged: with no script share the web is byte for
// byte what it was; with half the hosts script-built, the other half are
// byte for byte what they are with none.
func TestServerRenderedUnchanged(t *testing.T) {
	cfg := Config{Hosts: 30, Articles: 20, Seed: 7}
	plain := startWeb(t, cfg)
	all := map[string]string{}
	perHost := make([]map[string]string, cfg.Hosts)
	for h := range cfg.Hosts {
		perHost[h] = hostPages(t, plain, h)
		for p, b := range perHost[h] {
			all[strconv.Itoa(h)+p] = b
		}
	}
	if got := hashPages(all); got != goldenServerRendered {
		t.Errorf("server-rendered web changed: hash %s, want %s", got, goldenServerRendered)
	}

	cfg.ScriptShare = 0.5
	mixed := startWeb(t, cfg)
	scripted := 0
	for h := range cfg.Hosts {
		if mixed.ScriptBuilt(h) {
			scripted++
			continue
		}
		for p, want := range perHost[h] {
			if got := hostPages(t, mixed, h)[p]; got != want {
				t.Errorf("host %d %s differs with script share 0.5", h, p)
			}
		}
	}
	if scripted != 15 {
		t.Errorf("%d script-built hosts, want 15", scripted)
	}
}

func startWeb(t *testing.T, cfg Config) *Web {
	t.Helper()
	w, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// TestScriptShare: round(share × hosts) hosts are script-built, the same
// ones for a seed, others for another seed; a share out of [0, 1] or with
// another shape is refused.
func TestScriptShare(t *testing.T) {
	tests := []struct {
		share float64
		want  int
	}{{0, 0}, {0.1, 4}, {0.25, 10}, {0.5, 20}, {0.99, 40}, {1, 40}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.share), func(t *testing.T) {
			cfg := Config{Hosts: 40, Seed: 3, ScriptShare: tt.share}
			a, b := scriptHosts(cfg), scriptHosts(cfg)
			n := 0
			for h := range 40 {
				if h < len(a) && a[h] {
					n++
				}
			}
			if n != tt.want || !slices.Equal(a, b) {
				t.Errorf("%d script-built hosts (want %d), deterministic %v", n, tt.want, slices.Equal(a, b))
			}
		})
	}
	if slices.Equal(scriptHosts(Config{Hosts: 40, Seed: 3, ScriptShare: 0.5}), scriptHosts(Config{Hosts: 40, Seed: 4, ScriptShare: 0.5})) {
		t.Error("seeds 3 and 4 pick the same hosts")
	}
	for _, cfg := range []Config{
		{ScriptShare: -0.1}, {ScriptShare: 1.5}, {ScriptShare: math.NaN()},
		{ScriptShare: 0.5, Shop: true}, {ScriptShare: 0.5, BestDeep: true},
	} {
		cfg.setDefaults()
		if cfg.Validate() == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// visible is the visible text of a server-rendered page, without white
// space: its tags, scripts, styles and SVG removed, entities decoded.
func visible(page []byte) string {
	s := blockRE.ReplaceAllString(string(page), "")
	s = regexp.MustCompile(`(?s)<[^>]*>`).ReplaceAllString(s, "")
	return strings.Join(strings.Fields(html.UnescapeString(s)), "")
}

// dataText is the text of a page's data, as the script writes it,
// without white space.
func dataText(d pageData) string {
	var b strings.Builder
	b.WriteString(d.Title)
	for _, block := range d.Blocks {
		for _, r := range block {
			b.WriteString(r.Text)
		}
	}
	return strings.Join(strings.Fields(b.String()), "")
}

func dataLinks(d pageData) []string {
	var out []string
	for _, block := range d.Blocks {
		for _, r := range block {
			if r.Href != nil {
				out = append(out, *r.Href)
			}
		}
	}
	return out
}

func pageLinks(page []byte) []string {
	var out []string
	for _, m := range hrefRE.FindAllSubmatch(page, -1) {
		out = append(out, html.UnescapeString(string(m[1])))
	}
	return out
}

// TestScriptBuiltPages: every HTML page of a script-built host (an
// ordinary one, a GBK one, one with a calendar) is a shell without its
// text or links; its /data/<page>.json holds the text and the links of the
// server-rendered page, in order; robots.txt allows /app.js and /data/;
// the requests are counted by kind.
func TestScriptBuiltPages(t *testing.T) {
	w := startWeb(t, Config{Hosts: 30, Articles: 20, Seed: 7, ScriptShare: 1})
	c := &http.Client{}
	for _, h := range []int{0, 9, 24} {
		base := "http://" + w.Hosts()[h]
		pages := []struct {
			path, data string
			server     []byte
		}{
			{"/", "/data/index.json", w.index(h)},
			{"/list?page=2", "/data/list.json?page=2", w.list(h, 2)},
			{w.articlePath(7), "/data" + w.articlePath(7) + ".json", w.article(h, 7)},
		}
		if h == 24 {
			pages = append(pages, struct {
				path, data string
				server     []byte
			}{"/cal/2026/11", "/data/cal/2026/11.json", calendar(month{2026, 11}, false)})
		}
		for _, pg := range pages {
			status, ct, shell := get(t, c, base+pg.path)
			if status != http.StatusOK || ct != "text/html; charset=utf-8" {
				t.Fatalf("host %d %s: %d %s", h, pg.path, status, ct)
			}
			for _, want := range []string{`<div id="app"></div>`, `<script src="/app.js"></script>`, `<noscript>Please enable JavaScript</noscript>`} {
				if !strings.Contains(string(shell), want) {
					t.Errorf("host %d %s: shell lacks %s", h, pg.path, want)
				}
			}
			status, ct, raw := get(t, c, base+pg.data)
			if status != http.StatusOK || ct != "application/json" {
				t.Fatalf("host %d %s: %d %s", h, pg.data, status, ct)
			}
			var d pageData
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatalf("host %d %s: %v", h, pg.data, err)
			}
			if !strings.Contains(string(shell), "<title>"+html.EscapeString(d.Title)+"</title>") || d.Title == "" {
				t.Errorf("host %d %s: shell title, data title %q", h, pg.path, d.Title)
			}
			if strings.Contains(string(shell), "<a ") || strings.Contains(visible(shell), dataText(d)[len(d.Title):][:20]) {
				t.Errorf("host %d %s: the shell holds links or text:\n%s", h, pg.path, shell)
			}
			if got, want := dataText(d), visible(pg.server); got != want {
				t.Errorf("host %d %s: data text differs from the server-rendered page's:\n%.300s\n%.300s", h, pg.path, got, want)
			}
			if got, want := dataLinks(d), pageLinks(pg.server); !slices.Equal(got, want) || len(got) == 0 {
				t.Errorf("host %d %s: data links %v, server-rendered %v", h, pg.path, got, want)
			}
		}
		status, _, robots := get(t, c, base+"/robots.txt")
		if status != http.StatusOK || string(robots) != "User-agent: *\nAllow: /app.js\nAllow: /data/\nDisallow: /private/\n" {
			t.Errorf("host %d robots.txt: %q", h, robots)
		}
		if status, _, _ := get(t, c, base+"/data/news/1999/story-1.html.json"); status != http.StatusNotFound {
			t.Errorf("data of no page: %d", status)
		}
		if status, ct, js := get(t, c, base+"/app.js"); status != http.StatusOK || !strings.HasPrefix(ct, "text/javascript") || !strings.Contains(string(js), `fetch("/data"`) {
			t.Errorf("app.js: %d %s", status, ct)
		}
	}
	st := settledStats(t, w)
	if st.ByKind[KindScript] != 3 || st.ByKind[KindData] != 13 || st.Pages != 9 {
		t.Errorf("by kind %v, pages %d", st.ByKind, st.Pages)
	}
	if got := w.ScriptBuiltHosts(); len(got) != 30 || got[0] != w.Hosts()[0] {
		t.Errorf("script-built hosts %v", got)
	}
}

// TestShellCopyInRendersniff: the fetcher's rendersniff tests keep a copy
// of a websim shell (they cannot import websim); it is the shell websim
// serves.
func TestShellCopyInRendersniff(t *testing.T) {
	copied, err := os.ReadFile("../../../../services/fetcher/internal/rendersniff/testdata/websim-shell.html")
	if err != nil {
		t.Fatal(err)
	}
	title := regexp.MustCompile(`<title>(.*)</title>`).FindSubmatch(copied)
	if title == nil || !bytes.Equal(shellOf(html.UnescapeString(string(title[1]))), copied) {
		t.Errorf("rendersniff's copy of the shell is not websim's:\n%s\nwebsim:\n%s", copied, shellOf("…"))
	}
}

// TestScriptBuiltInChromium: in a real browser, /app.js builds a
// script-built article with the text and the links, in order, of its
// server-rendered version.
func TestScriptBuiltInChromium(t *testing.T) {
	chrome := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			chrome = p
			break
		}
	}
	if chrome == "" {
		t.Skip("no chromium on the PATH (apt-get install chromium)")
	}
	w := startWeb(t, Config{Hosts: 10, Articles: 20, Seed: 7, ScriptShare: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	const h, i = 2, 7
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+w.Hosts()[h]+w.articlePath(i)),
		chromedp.WaitReady(chromedp.CSS("#app a"))); err != nil {
		t.Fatalf("load the shell: %v", err)
	}
	links, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#app a")].map(a => a.getAttribute("href"))`))
	if err != nil {
		t.Fatal(err)
	}
	text, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.title + document.getElementById("app").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	server := w.article(h, i)
	if want := pageLinks(server); !slices.Equal(links, want) {
		t.Errorf("links in the DOM %v, server-rendered %v", links, want)
	}
	if got, want := strings.Join(strings.Fields(text), ""), visible(server); got != want {
		t.Errorf("text in the DOM differs from the server-rendered page's:\n%.300s\n%.300s", got, want)
	}
}
