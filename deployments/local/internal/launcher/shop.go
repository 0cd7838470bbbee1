package launcher

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
	"github.com/trawl-crawler/trawl/libs/doctypes"
)

// webSeed is the seed of the generated web the launcher serves (websim's
// --seed): a shop's known values are computed from it.
const webSeed = 1

// ShopReport is what a crawl of a shop web (--web-shop) stored of the
// values known in advance, read from ClickHouse after the crawl: each
// product page's fields (documents.fields), JSON-LD items, microdata
// items, OpenGraph properties and malformed blocks
// (document_meta.structured_errors), and the text of its manual and spec
// sheet when the crawl kept them (--documents pdf,docx).
type ShopReport struct {
	Products      int             `json:"products"` // product pages of the web
	Rules         bool            `json:"rules"`    // the crawl had extraction rules (--extract)
	Tally         websim.Tally    `json:"tally"`
	Manuals       websim.DocTally `json:"manuals"`
	Specs         websim.DocTally `json:"spec_sheets"`
	KeptDocuments []string        `json:"kept_documents,omitempty"` // the crawl's documents.content_types
}

var (
	productPath = regexp.MustCompile(`^/product/([0-9]+)$`)
	manualPath  = regexp.MustCompile(`^/manual/([0-9]+)\.pdf$`)
	specPath    = regexp.MustCompile(`^/spec/([0-9]+)\.docx$`)
)

// shopPage names the product a stored URL belongs to: its host's index
// among hosts (host:port, websim's order) and the number its path re
// matches.
func shopPage(hosts map[string]int, re *regexp.Regexp, raw string) (h, n int, ok bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, 0, false
	}
	h, ok = hosts[u.Host]
	m := re.FindStringSubmatch(u.Path)
	if !ok || m == nil {
		return 0, 0, false
	}
	n, err = strconv.Atoi(m[1])
	return h, n, err == nil
}

// ReadShop reads what crawl crawlID stored of a shop web of these hosts
// (host:port, in websim's order), articles products each and this seed,
// and checks every product page and document against its known values.
// Without rules (the crawl's extract) the fields are not checked.
func ReadShop(ctx context.Context, conn driver.Conn, crawlID string, hosts []string, articles int, seed uint64, rules bool) (ShopReport, error) {
	r := ShopReport{Products: len(hosts) * articles, Rules: rules}
	r.Tally.NoRules = !rules
	idx := make(map[string]int, len(hosts))
	for i, h := range hosts {
		idx[h] = i
	}
	errs := map[uint64]uint16{}
	rows, err := conn.Query(ctx, `SELECT url_fp, structured_errors FROM document_meta FINAL WHERE crawl_id = ? AND match(url, '/product/[0-9]+$')`, crawlID)
	if err != nil {
		return r, fmt.Errorf("read shop pages' meta: %w", err)
	}
	for rows.Next() {
		var fp uint64
		var n uint16
		if err := rows.Scan(&fp, &n); err != nil {
			rows.Close()
			return r, fmt.Errorf("read shop pages' meta: %w", err)
		}
		errs[fp] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read shop pages' meta: %w", err)
	}
	rows, err = conn.Query(ctx, `SELECT url, url_fp, fields, json_ld, microdata, opengraph FROM documents FINAL
		WHERE crawl_id = ? AND match(url, '/product/[0-9]+$') ORDER BY url`, crawlID)
	if err != nil {
		return r, fmt.Errorf("read shop pages: %w", err)
	}
	for rows.Next() {
		var s websim.Stored
		var fp uint64
		if err := rows.Scan(&s.URL, &fp, &s.Fields, &s.JSONLD, &s.Microdata, &s.OpenGraph); err != nil {
			rows.Close()
			return r, fmt.Errorf("read shop pages: %w", err)
		}
		h, n, ok := shopPage(idx, productPath, s.URL)
		if !ok || n >= articles {
			continue
		}
		s.StructuredErrors = int(errs[fp])
		r.Tally.Add(websim.ShopProduct(seed, h, n), s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read shop pages: %w", err)
	}
	for h := range hosts {
		for n := range articles {
			p := websim.ShopProduct(seed, h, n)
			r.Manuals.Known += btoi(p.Manual)
			r.Specs.Known += btoi(p.Spec)
		}
	}
	rows, err = conn.Query(ctx, `SELECT url, title, text, properties FROM documents FINAL
		WHERE crawl_id = ? AND (match(url, '/manual/[0-9]+[.]pdf$') OR match(url, '/spec/[0-9]+[.]docx$')) ORDER BY url`, crawlID)
	if err != nil {
		return r, fmt.Errorf("read shop documents: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var u, title, text, props string
		if err := rows.Scan(&u, &title, &text, &props); err != nil {
			return r, fmt.Errorf("read shop documents: %w", err)
		}
		if h, n, ok := shopPage(idx, manualPath, u); ok && n < articles {
			r.Manuals.Add(u, websim.ShopProduct(seed, h, n).ManualDoc(), title, text, props)
		} else if h, n, ok := shopPage(idx, specPath, u); ok && n < articles {
			r.Specs.Add(u, websim.ShopProduct(seed, h, n).SpecDoc(), title, text, props)
		}
	}
	return r, rows.Err()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func share(n, of int) float64 { return 100 * float64(n) / float64(max(of, 1)) }

// Print writes the shop's figures: issue 37's "fields exact" and
// "structured data blocks, values exact", and the documents' text.
func (r ShopReport) Print(out io.Writer) {
	t := r.Tally
	fmt.Fprintf(out, "  shop: %d of %d product pages stored and checked\n", t.Pages, r.Products)
	if r.Rules {
		fmt.Fprintf(out, "  %-22s %8.1f%%   %d of %d fields exact (%d found); %d of %d pages with every field exact\n", "fields exact", share(t.FieldsExact, t.Fields),
			t.FieldsExact, t.Fields, t.FieldsFound, t.PagesExact, t.Pages)
	} else {
		fmt.Fprintf(out, "  %-22s %9s   no extraction rules: --extract deployments/local/bench/shop-extract.json\n", "fields exact", "–")
	}
	fmt.Fprintf(out, "  %-22s %8.1f%%   %d of %d items found, %d exact\n", "JSON-LD exact", share(t.JSONLDExact, t.JSONLD), t.JSONLDFound, t.JSONLD, t.JSONLDExact)
	fmt.Fprintf(out, "  %-22s %8.1f%%   %d of %d items exact\n", "microdata exact", share(t.MicrodataExact, t.Microdata), t.MicrodataExact, t.Microdata)
	fmt.Fprintf(out, "  %-22s %8.1f%%   %d of %d properties exact\n", "OpenGraph exact", share(t.OpenGraphExact, t.OpenGraph), t.OpenGraphExact, t.OpenGraph)
	fmt.Fprintf(out, "  %-22s %8.1f%%   %d of %d malformed JSON-LD blocks recorded (document_meta.structured_errors)\n", "malformed recorded",
		share(t.MalformedRecorded, t.Malformed), t.MalformedRecorded, t.Malformed)
	for _, d := range []struct {
		name, short, mediaType string
		t                      websim.DocTally
	}{{"manuals", "pdf", doctypes.PDF, r.Manuals}, {"spec sheets", "docx", doctypes.DOCX, r.Specs}} {
		label := d.name + " (" + d.short + ")"
		if !slices.Contains(r.KeptDocuments, d.mediaType) {
			fmt.Fprintf(out, "  %-22s %9s   %d linked, not kept: --documents pdf,docx\n", label, "–", d.t.Known)
			continue
		}
		fmt.Fprintf(out, "  %-22s %8.1f%%   %d of %d stored, %d with every known word in their text, %d with the known title, author and pages\n", label,
			share(d.t.WordsAll, d.t.Known), d.t.Stored, d.t.Known, d.t.WordsAll, d.t.MetaExact)
	}
	var first []string
	for _, m := range [][]string{t.Mismatches, r.Manuals.Mismatches, r.Specs.Mismatches} {
		first = append(first, m...)
	}
	if len(first) > 0 {
		fmt.Fprintf(out, "  first mismatches:\n    %s\n", strings.Join(first[:min(len(first), websim.MaxMismatches)], "\n    "))
	}
}
