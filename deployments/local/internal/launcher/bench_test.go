package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/supervise"
	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

// TestBenchTrapDeep: the benchmark prints the calendar requests past
// their second hop next to the trap's, as a share of all requests, and
// writes them to the JSON figures.
func TestBenchTrapDeep(t *testing.T) {
	b := Bench{WebHosts: 4, Web: &websim.Stats{Requests: 200, Trap: 12, TrapDeep: 9}}
	var out bytes.Buffer
	b.Print(&out)
	if want := "calendar trap pages 12, 9 past their second hop = 4.5% of requests"; !strings.Contains(out.String(), want) {
		t.Errorf("bench output lacks %q:\n%s", want, out.String())
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := b.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Web struct {
			Trap     int `json:"trap"`
			TrapDeep int `json:"trap_deep"`
		} `json:"web"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.Web.Trap != 12 || v.Web.TrapDeep != 9 {
		t.Errorf("bench JSON web trap %d, trap_deep %d; want 12 and 9", v.Web.Trap, v.Web.TrapDeep)
	}
}

// websimBin builds the websim command and returns its path.
func websimBin(t *testing.T) string {
	t.Helper()
	root, err := supervise.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bins, err := supervise.BuildTools(t.Context(), root, t.TempDir(), []string{"websim"})
	if err != nil {
		t.Fatal(err)
	}
	return bins["websim"]
}

// startTestWeb runs the websim command bin as the launcher does with the
// launcher flags args, until the test ends.
func startTestWeb(t *testing.T, bin string, args ...string) *web {
	t.Helper()
	cfg, err := parse(t, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	site, err := startWeb(t.Context(), bin, "", cfg.webArgs(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = site.proc.Stop(10 * time.Second) })
	return site
}

// TestWebTrapFlagsReachWebsim runs the websim command as the launcher
// does and reads its calendar trap: the trap flags reach the process,
// and its stats count the requests past the trap's second hop.
func TestWebTrapFlagsReachWebsim(t *testing.T) {
	bin := websimBin(t)
	tests := []struct {
		name      string
		args      []string
		links     int // links of the entry month's page; 0: no trap (404)
		trapDeep  int // after requesting 2026/11 and 2027/11
		trapPages int
	}{
		{"line", []string{"--web-trap-every", "1"}, 3, 1, 2},
		{"grid", []string{"--web-trap-every", "1", "--web-trap-grid"}, 5, 0, 2},
		{"none", []string{"--web-trap-every", "-1"}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			site := startTestWeb(t, bin, append([]string{"--web", "--web-hosts", "1", "--web-articles", "2"}, tt.args...)...)
			status, body := httpGet(t, site.ready.Seeds[0]+"cal/2026/11")
			switch {
			case tt.links == 0 && status != http.StatusNotFound:
				t.Errorf("entry month: status %d, want 404 without a trap", status)
			case tt.links > 0 && status != http.StatusOK:
				t.Errorf("entry month: status %d, want 200", status)
			case tt.links > 0 && strings.Count(body, "<a href=") != tt.links:
				t.Errorf("entry month links %d pages, want %d:\n%s", strings.Count(body, "<a href="), tt.links, body)
			}
			httpGet(t, site.ready.Seeds[0]+"cal/2027/11")
			s, err := site.stats(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if s.Trap != tt.trapPages || s.TrapDeep != tt.trapDeep {
				t.Errorf("trap %d, trap_deep %d; want %d and %d", s.Trap, s.TrapDeep, tt.trapPages, tt.trapDeep)
			}
		})
	}
}

// httpGet returns the status and body of GET u.
func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestBenchMostLinked: on a best-deep web the benchmark prints how many
// of its most linked pages the crawl holds, with the page budget and the
// crawl order, and writes them to the JSON figures.
func TestBenchMostLinked(t *testing.T) {
	b := Bench{WebHosts: 20, MaxPages: 2120, Order: "breadth-first",
		Web: &websim.Stats{Requests: 2180, Pages: 2120, PagesTotal: 10600, MostLinked: 53, MostLinkedTotal: 1060}}
	var out bytes.Buffer
	b.Print(&out)
	want := "most-linked pages held: 53 of 1060 (5.0 %) with a budget of 2120 pages (20 % of the web's 10600), breadth-first; 2180 requests"
	if !strings.Contains(out.String(), want) {
		t.Errorf("bench output lacks %q:\n%s", want, out.String())
	}
	out.Reset()
	Bench{Web: &websim.Stats{Requests: 10}}.Print(&out)
	if strings.Contains(out.String(), "most-linked") {
		t.Errorf("a web without a most linked set prints a most-linked line:\n%s", out.String())
	}
	path := filepath.Join(t.TempDir(), "bench.json")
	if err := b.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		MaxPages uint64 `json:"max_pages"`
		Order    string `json:"order"`
		Web      struct {
			MostLinked      int `json:"most_linked"`
			MostLinkedTotal int `json:"most_linked_total"`
		} `json:"web"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if v.MaxPages != 2120 || v.Order != "breadth-first" || v.Web.MostLinked != 53 || v.Web.MostLinkedTotal != 1060 {
		t.Errorf("bench JSON: %+v", v)
	}
}

// TestWebBestDeepReachesWebsim runs the websim command as the launcher
// does with --web-best-deep: it serves the best-deep sites, and its stats
// count a fetched page of the most linked set.
func TestWebBestDeepReachesWebsim(t *testing.T) {
	bin := websimBin(t)
	site := startTestWeb(t, bin, "--web", "--web-hosts", "2", "--web-best-deep", "--max-pages", "212")
	if site.ready.Pages != 2*530 {
		t.Errorf("%d content pages, want 2 × 530", site.ready.Pages)
	}
	if status, _ := httpGet(t, site.ready.Seeds[0]+"top/0.html"); status != http.StatusOK {
		t.Errorf("a popular page: status %d, want 200", status)
	}
	s, err := site.stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if s.MostLinked != 1 || s.MostLinkedTotal != 106 {
		t.Errorf("most linked %d of %d, want 1 of 106", s.MostLinked, s.MostLinkedTotal)
	}
}

// TestWebShopReachesWebsim runs the websim command as the launcher does
// with --web-shop: it serves shops, of the seed the bench computes the
// known values from (a product page's name and SKU are the known ones).
func TestWebShopReachesWebsim(t *testing.T) {
	bin := websimBin(t)
	site := startTestWeb(t, bin, "--web", "--web-hosts", "2", "--web-articles", "20", "--web-shop")
	for h, seed := range site.ready.Seeds {
		p := websim.ShopProduct(webSeed, h, 13)
		status, body := httpGet(t, seed+"product/13")
		if status != http.StatusOK {
			t.Fatalf("product 13 of host %d: status %d", h, status)
		}
		for _, want := range []string{`itemprop="name">` + p.Name + "<", `<meta itemprop="sku" content="` + p.SKU + `">`, p.PriceText} {
			if !strings.Contains(body, want) {
				t.Errorf("product 13 of host %d lacks %q", h, want)
			}
		}
	}
	// 2 shops: a home, 5 category lists (4 products each, 10 a page) and 20 products.
	if site.ready.Pages != 2*26 {
		t.Errorf("%d content pages, want 2 × 26", site.ready.Pages)
	}
}

// TestBenchShop: with a shop web the benchmark prints the figures of
// issue 37: the shares of fields, JSON-LD items, microdata items and
// OpenGraph properties stored exactly, of the malformed blocks recorded,
// of the documents whose text holds their known words, and the first
// mismatches; without rules or kept documents it says which flag gives
// them.
func TestBenchShop(t *testing.T) {
	p := websim.ShopProduct(webSeed, 0, 7) // malformed JSON-LD: n % 20 == 7
	page := "http://127.1.0.1:8080" + p.Path()
	u, err := url.Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	fields := p.Fields(u)
	fields["price"] = 1.5 // one field wrong
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	r := ShopReport{Products: 40, Rules: true, KeptDocuments: []string{"application/pdf"}}
	r.Tally.Add(p, websim.Stored{URL: page, Fields: enc(fields), JSONLD: enc(p.JSONLD()), Microdata: enc(p.Microdata(u)),
		OpenGraph: enc(p.OpenGraph(u)), StructuredErrors: 1})
	r.Manuals = websim.DocTally{Known: 2}
	r.Manuals.Add("http://127.1.0.1:8080/manual/3.pdf", websim.KnownDoc{Words: []string{"Kettle", "TS-000"}, Title: "Manual: Kettle", Author: "A", Pages: 2},
		"Manual: Kettle", "Manual Kettle TS-000-00003", `{"author": "B", "pages": 2}`)
	b := Bench{WebHosts: 1, Web: &websim.Stats{Requests: 10}, Shop: &r}
	var out bytes.Buffer
	b.Print(&out)
	n := len(fields)
	for _, want := range []string{
		"1 of 40 product pages stored",
		fmt.Sprintf("%.1f%%   %d of %d fields exact (%d found); 0 of 1 pages with every field exact", 100*float64(n-1)/float64(n), n-1, n, n),
		"100.0%   2 of 2 items found, 2 exact",
		"100.0%   1 of 1 items exact",
		"100.0%   9 of 9 properties exact",
		"100.0%   1 of 1 malformed JSON-LD blocks recorded",
		"50.0%   1 of 2 stored, 1 with every known word in their text, 0 with the known title, author and pages",
		`manual/3.pdf: title "Manual: Kettle", properties {"author": "B", "pages": 2}; want title "Manual: Kettle", author "A", pages 2`,
		"spec sheets (docx)             –   0 linked, not kept",
		"field price: got 1.5, want " + strconv.FormatFloat(float64(p.Cents)/100, 'f', -1, 64),
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bench output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	none := ShopReport{Products: 40}
	none.Tally.NoRules = true
	none.Tally.Add(p, websim.Stored{URL: page})
	none.Print(&out)
	for _, want := range []string{"--extract deployments/local/bench/shop-extract.json", "not kept: --documents pdf,docx", "0.0%   0 of 2 items found, 0 exact"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report without rules lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "field ") {
		t.Errorf("report without rules lists field mismatches:\n%s", out.String())
	}
}

// TestWebShapeFlags: the shop and the best-deep web are shapes of the
// generated web, one at a time.
func TestWebShapeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--web-shop"},
		{"--web", "--web-shop", "--web-best-deep"},
		{"--web", "--web-shop", "--web-articles", "4"},
	} {
		if _, err := parse(t, args, nil); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
