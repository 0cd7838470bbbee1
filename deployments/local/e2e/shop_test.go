package e2e_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/launcher"
	"github.com/trawl-crawler/trawl/deployments/local/internal/pipeline"
	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

// shopRules is the shop's committed extraction rules, as --extract takes
// them (make bench-extract crawls with the same file).
const shopRules = "../bench/shop-extract.json"

// TestWebShopExtract crawls a small shop web (websim.Config.Shop) with the
// committed rules and the documents pdf and docx kept, as
// `crawl --web --web-shop --extract bench/shop-extract.json --documents
// pdf,docx` does, and checks what ClickHouse stored against the values
// the shop's pages are generated with (launcher.ReadShop, the bench's
// reading): every product page stored; its JSON-LD items (a single
// block, an @graph's elements, two blocks), microdata items and OpenGraph
// and Twitter card properties exact; every malformed JSON-LD block
// recorded (document_meta.structured_errors), none other; every field of
// the rules exact (documents.fields); every manual (PDF) and spec sheet
// (docx) stored with its known words in its text and its known title,
// author and pages (documents.title, properties).
func TestWebShopExtract(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Second)
	defer cancel()
	const hosts, products, seed = 3, 20, 37
	e := startWebEnv(t, ctx, webEnvConfig{
		web:   websim.Config{Hosts: hosts, Articles: products, FirstAddr: netip.MustParseAddr("127.1.74.1"), Seed: seed, Shop: true},
		delay: e2eDelay,
		args:  webArgs,
	})
	rules, err := os.ReadFile(shopRules)
	if err != nil {
		t.Fatal(err)
	}
	req := map[string]any{
		"crawl_id":  e.crawlID,
		"name":      t.Name(),
		"scope":     map[string]any{"allow_hosts": e.hostNames()},
		"limits":    map[string]any{"max_depth": 8},
		"extract":   json.RawMessage(rules),
		"documents": map[string]any{"content_types": []string{"pdf", "docx"}},
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(e.dataDir, "spec.json")
	if err := os.WriteFile(spec, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.Seed(ctx, pipeline.SeedRun{CrawlID: e.crawlID, Seeds: e.web.Seeds(), SpecFile: spec}); err != nil {
		t.Fatalf("seed: %v", err)
	}
	s := e.drain(ctx, 150*time.Second)
	e.stop()
	st := e.web.Stats()
	t.Logf("crawl drained: %s; site: %d requests, %d of %d content pages, by kind %v", s.Line(), st.Requests, st.Pages, st.PagesTotal, st.ByKind)
	if st.Pages != st.PagesTotal {
		t.Errorf("fetched %d of %d content pages, want all", st.Pages, st.PagesTotal)
	}

	r, err := launcher.ReadShop(ctx, e.p.Store.Conn(), e.crawlID, e.web.Hosts(), products, seed, true)
	if err != nil {
		t.Fatal(err)
	}
	r.KeptDocuments = []string{"application/pdf", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"}
	var out strings.Builder
	r.Print(&out)
	t.Logf("what the crawl stored of the shop's known values:\n%s", out.String())
	tl := r.Tally
	if tl.Pages != hosts*products {
		t.Errorf("%d product pages stored, want %d", tl.Pages, hosts*products)
	}
	if tl.JSONLD == 0 || tl.JSONLDExact != tl.JSONLD || tl.JSONLDFound != tl.JSONLD {
		t.Errorf("JSON-LD items: %d found, %d exact of %d; want all exact", tl.JSONLDFound, tl.JSONLDExact, tl.JSONLD)
	}
	if tl.Microdata == 0 || tl.MicrodataExact != tl.Microdata {
		t.Errorf("microdata items: %d exact of %d; want all", tl.MicrodataExact, tl.Microdata)
	}
	if tl.OpenGraph == 0 || tl.OpenGraphExact != tl.OpenGraph {
		t.Errorf("OpenGraph properties: %d exact of %d; want all", tl.OpenGraphExact, tl.OpenGraph)
	}
	if tl.Malformed == 0 || tl.MalformedRecorded != tl.Malformed {
		t.Errorf("malformed JSON-LD blocks: %d recorded of %d; want all", tl.MalformedRecorded, tl.Malformed)
	}
	// The structured data mismatches (fields aside) must be none.
	for _, m := range tl.Mismatches {
		if !strings.Contains(m, " field ") {
			t.Errorf("mismatch: %s", m)
		}
	}
	if t.Failed() {
		return
	}

	t.Run("fields", func(t *testing.T) {
		if tl.Fields == 0 || tl.FieldsExact != tl.Fields || tl.PagesExact != tl.Pages {
			t.Errorf("fields: %d exact of %d (%d found); %d of %d pages with every field exact:\n%s",
				tl.FieldsExact, tl.Fields, tl.FieldsFound, tl.PagesExact, tl.Pages, strings.Join(tl.Mismatches, "\n"))
		}
	})
	t.Run("documents", func(t *testing.T) {
		for _, d := range []struct {
			name string
			t    websim.DocTally
		}{{"manuals", r.Manuals}, {"spec sheets", r.Specs}} {
			if d.t.Known == 0 || d.t.Stored != d.t.Known || d.t.WordsAll != d.t.Known || d.t.MetaExact != d.t.Known {
				t.Errorf("%s: %d of %d stored, %d with every known word, %d with the known title, author and pages: %v",
					d.name, d.t.Stored, d.t.Known, d.t.WordsAll, d.t.MetaExact, d.t.Mismatches)
			}
		}
	})
}
