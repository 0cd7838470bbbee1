package websim

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/go-pdf/fpdf"
)

// shopDocTime is when every manual and spec sheet was made: the documents
// are the same bytes at every request.
var shopDocTime = time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)

// ManualPages is the number of pages of the product's manual (2 or 3).
func (p Product) ManualPages() int { return 2 + p.N%2 }

// ManualTitle is the title a manual's metadata gives (its author is
// ShopDocAuthor).
func (p Product) ManualTitle() string { return "Manual: " + p.Name }

// SpecTitle is the title a spec sheet's metadata gives.
func (p Product) SpecTitle() string { return "Specification: " + p.Name }

// KnownDoc is what one of a shop's documents is known to hold: words of
// its text, its title and author, and its pages (0: not counted, a docx).
type KnownDoc struct {
	Words  []string
	Title  string
	Author string
	Pages  int
}

// ManualDoc is what the product's manual holds.
func (p Product) ManualDoc() KnownDoc {
	return KnownDoc{Words: p.ManualWords(), Title: p.ManualTitle(), Author: ShopDocAuthor, Pages: p.ManualPages()}
}

// SpecDoc is what the product's spec sheet holds.
func (p Product) SpecDoc() KnownDoc {
	return KnownDoc{Words: p.SpecWords(), Title: p.SpecTitle(), Author: ShopDocAuthor}
}

// ManualWords are words the text of the product's manual holds: its
// name, its SKU and every page's chapter heading. They are checked one by
// one, not as phrases: a PDF's text keeps words, not always their spacing.
func (p Product) ManualWords() []string {
	out := append(strings.Fields(p.Name), p.SKU, "Manual")
	for c := 1; c <= p.ManualPages(); c++ {
		out = append(out, "Chapter"+strconv.Itoa(c))
	}
	return out
}

// SpecWords are words the text of the product's spec sheet holds.
func (p Product) SpecWords() []string {
	out := append(strings.Fields(p.Name), p.SKU, "Specification", p.CategoryName())
	return append(out, p.Tags...)
}

// manualText is the body text of chapter c of the manual.
func (p Product) manualText(c int) string {
	rng := rand.New(rand.NewPCG(uint64(p.Host)<<32|uint64(p.N), uint64(c)))
	var b strings.Builder
	for range 12 {
		for i := range 10 + rng.IntN(8) {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		b.WriteString(". ")
	}
	return b.String()
}

// ManualPDF makes the product's manual: ManualPages pages, its name and
// SKU on the first, a chapter a page ("Chapter1" …), a link to the
// product's page on site (the scheme and host:port of its shop), and
// ManualTitle and ShopDocAuthor in its metadata.
func ManualPDF(p Product, site string) ([]byte, error) {
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetCreationDate(shopDocTime)
	pdf.SetModificationDate(shopDocTime)
	pdf.SetCatalogSort(true) // the same bytes at every request
	pdf.SetTitle(p.ManualTitle(), true)
	pdf.SetAuthor(ShopDocAuthor, true)
	pdf.SetCreator("websim", true)
	for c := 1; c <= p.ManualPages(); c++ {
		pdf.AddPage()
		pdf.SetFont("Helvetica", "B", 16)
		if c == 1 {
			pdf.Cell(0, 10, "Manual")
			pdf.Ln(12)
			pdf.Cell(0, 10, p.Name)
			pdf.Ln(12)
			pdf.SetFont("Helvetica", "", 12)
			pdf.Cell(0, 8, "SKU "+p.SKU)
			pdf.Ln(10)
			pdf.WriteLinkString(6, "Product page: "+site+p.Path(), site+p.Path())
			pdf.Ln(10)
			pdf.SetFont("Helvetica", "B", 16)
		}
		pdf.Cell(0, 10, "Chapter"+strconv.Itoa(c))
		pdf.Ln(12)
		pdf.SetFont("Helvetica", "", 11)
		pdf.MultiCell(0, 5, p.manualText(c), "", "L", false)
	}
	var b bytes.Buffer
	if err := pdf.Output(&b); err != nil {
		return nil, fmt.Errorf("make manual of product %d: %w", p.N, err)
	}
	return b.Bytes(), nil
}

// SpecDocx makes the product's spec sheet: a minimal valid Office Open
// XML document ([Content_Types].xml, _rels/.rels, word/document.xml,
// docProps/core.xml) whose paragraphs name the product, its SKU, category,
// price and tags, with SpecTitle and ShopDocAuthor in its metadata.
func SpecDocx(p Product) ([]byte, error) {
	var body strings.Builder
	para := func(s string) {
		body.WriteString("<w:p><w:r><w:t xml:space=\"preserve\">")
		_ = xml.EscapeText(&body, []byte(s)) // a strings.Builder does not fail
		body.WriteString("</w:t></w:r></w:p>")
	}
	para("Specification")
	para(p.Name)
	para("SKU " + p.SKU)
	para("Category " + p.CategoryName())
	para("Price " + p.PriceText)
	para("Released " + p.Released.Format("2006-01-02"))
	para("Tags " + strings.Join(p.Tags, " "))
	esc := func(s string) string {
		var b strings.Builder
		_ = xml.EscapeText(&b, []byte(s))
		return b.String()
	}
	files := []struct{ name, body string }{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/><Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/><Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/></Relationships>`},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body.String() + `<w:sectPr/></w:body></w:document>`},
		{"docProps/core.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:dcterms="http://purl.org/dc/terms/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><dc:title>` +
			esc(p.SpecTitle()) + `</dc:title><dc:creator>` + esc(ShopDocAuthor) + `</dc:creator><dcterms:created xsi:type="dcterms:W3CDTF">` +
			shopDocTime.Format(time.RFC3339) + `</dcterms:created><dcterms:modified xsi:type="dcterms:W3CDTF">` +
			shopDocTime.Format(time.RFC3339) + `</dcterms:modified></cp:coreProperties>`},
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range files {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: shopDocTime})
		if err != nil {
			return nil, fmt.Errorf("make spec sheet of product %d: %w", p.N, err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			return nil, fmt.Errorf("make spec sheet of product %d: %w", p.N, err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("make spec sheet of product %d: %w", p.N, err)
	}
	return b.Bytes(), nil
}
