package doctext

import (
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestDocxMarkup: what of a docx's markup is text, and how it is laid out.
func TestDocxMarkup(t *testing.T) {
	const ns = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"`
	link := func(id, target string) string {
		return `<Relationship Id="` + id + `" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="` + target + `" TargetMode="External"/>`
	}
	tests := []struct {
		name, body string
		rels       []string
		want       string
		links      []string
	}{
		{name: "paragraphs and runs", body: `<w:p><w:r><w:t>Hello </w:t></w:r><w:r><w:t xml:space="preserve">wide </w:t></w:r><w:r><w:t>world</w:t></w:r></w:p><w:p><w:r><w:t>Next</w:t></w:r></w:p>`,
			want: "Hello wide world\nNext\n"},
		{name: "tab stops are not tabs", body: `<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr><w:r><w:t>a</w:t><w:tab/><w:t>b</w:t><w:br/><w:t>c</w:t></w:r></w:p>`,
			want: "a\tb\nc\n"},
		{name: "deleted text and field codes", body: `<w:p><w:del><w:r><w:delText>gone</w:delText></w:r></w:del><w:r><w:instrText>PAGE</w:instrText><w:t>kept</w:t></w:r></w:p>`,
			want: "kept\n"},
		{name: "text box once", body: `<w:p><w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:t>boxed</w:t></mc:Choice><mc:Fallback><w:t>boxed</w:t></mc:Fallback></mc:AlternateContent></w:r></w:p>`,
			want: "boxed\n"},
		{name: "table", body: `<w:tbl><w:tr><w:tc><w:p><w:r><w:t>a1</w:t></w:r></w:p><w:p><w:r><w:t>more</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b1</w:t></w:r></w:p></w:tc></w:tr><w:tr><w:tc><w:p><w:r><w:t>a2</w:t></w:r></w:p></w:tc><w:tc><w:p/></w:tc></w:tr></w:tbl><w:p><w:r><w:t>after</w:t></w:r></w:p>`,
			want: "a1 more\tb1\na2\t\nafter\n"},
		{name: "hyperlinks", body: `<w:p><w:hyperlink r:id="rId5"><w:r><w:t>abs</w:t></w:r></w:hyperlink><w:hyperlink r:id="rId6"><w:r><w:t>rel</w:t></w:r></w:hyperlink><w:hyperlink r:id="rId7"><w:r><w:t>mail</w:t></w:r></w:hyperlink><w:hyperlink w:anchor="x"><w:r><w:t>inside</w:t></w:r></w:hyperlink></w:p>`,
			rels:  []string{link("rId5", "https://example.org/a"), link("rId6", "../up/b.html"), link("rId7", "mailto:x@example.org")},
			want:  "absrelmailinside\n",
			links: []string{"https://example.org/a", "https://docs.example.com/up/b.html"}},
	}
	base, _ := url.Parse("https://docs.example.com/files/doc.docx")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := docx(t, zipEntry{data: `<w:document ` + ns + `><w:body>` + tt.body + `</w:body></w:document>`}, tt.rels...)
			doc, err := testExtractor.Extract(t.Context(), "", body, base, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if doc.Text != tt.want {
				t.Errorf("text %q, want %q", doc.Text, tt.want)
			}
			if !slices.Equal(doc.Links, tt.links) {
				t.Errorf("links %q, want %q", doc.Links, tt.links)
			}
		})
	}
}

// TestODFMarkup: what of an ODF text's markup is text.
func TestODFMarkup(t *testing.T) {
	const ns = `xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:xlink="http://www.w3.org/1999/xlink"`
	tests := []struct {
		name, body, want string
		links            []string
	}{
		{name: "spaces tabs breaks", body: `<text:h>Title</text:h><text:p>a<text:s text:c="3"/>b<text:tab/>c<text:line-break/>d<text:s/>e</text:p>`,
			want: "Title\na   b\tc\nd e\n"},
		{name: "comments and changes left out", body: `<text:tracked-changes><text:changed-region><text:deletion><text:p>old</text:p></text:deletion></text:changed-region></text:tracked-changes><text:p>kept<office:annotation><text:p>a remark</text:p></office:annotation> too</text:p>`,
			want: "kept too\n"},
		{name: "table", body: `<table:table table:name="T"><table:table-row><table:table-cell><text:p>a1</text:p><text:p>more</text:p></table:table-cell><table:table-cell><text:p>b1</text:p></table:table-cell></table:table-row><table:table-row><table:table-cell table:number-columns-repeated="1000"/></table:table-row></table:table><text:p>after</text:p>`,
			want: "a1 more\tb1\nafter\n"},
		{name: "links", body: `<text:p><text:a xlink:href="https://example.org/x">x</text:a> and <text:a xlink:href="sub/y.html">y</text:a> and <text:a xlink:href="#anchor">z</text:a></text:p>`,
			want: "x and y and z\n", links: []string{"https://example.org/x", "https://docs.example.com/files/sub/y.html"}},
	}
	base, _ := url.Parse("https://docs.example.com/files/doc.odt")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := buildZip(t,
				zipEntry{name: "mimetype", data: "application/vnd.oasis.opendocument.text"},
				zipEntry{name: "content.xml", data: `<office:document-content ` + ns + `><office:body><office:text>` + tt.body + `</office:text></office:body></office:document-content>`})
			if k := Kind("", body); k != FormatODT {
				t.Fatalf("Kind %q", k)
			}
			doc, err := testExtractor.Extract(t.Context(), "", body, base, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if doc.Text != tt.want {
				t.Errorf("text %q, want %q", doc.Text, tt.want)
			}
			if !slices.Equal(doc.Links, tt.links) {
				t.Errorf("links %q, want %q", doc.Links, tt.links)
			}
		})
	}
}

// TestXLSXStrings: shared strings (rich runs joined, phonetic runs left
// out, a bad index empty), inline strings, numbers, sheets in workbook
// order with their names.
func TestXLSXStrings(t *testing.T) {
	rel := func(id, typ, target string) string {
		return `<Relationship Id="` + id + `" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/` + typ + `" Target="` + target + `"/>`
	}
	rels := func(r ...string) string {
		s := `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">`
		for _, x := range r {
			s += x
		}
		return s + `</Relationships>`
	}
	body := buildZip(t,
		zipEntry{name: "_rels/.rels", data: rels(rel("rId1", "officeDocument", "xl/workbook.xml"))},
		zipEntry{name: "xl/workbook.xml", data: `<workbook xmlns:r="r"><sheets><sheet name="Second" r:id="rId2"/><sheet name="First" r:id="rId1"/></sheets></workbook>`},
		zipEntry{name: "xl/_rels/workbook.xml.rels", data: rels(rel("rId1", "worksheet", "worksheets/sheet1.xml"), rel("rId2", "worksheet", "/xl/worksheets/sheet2.xml"), rel("rId3", "sharedStrings", "sharedStrings.xml"))},
		zipEntry{name: "xl/sharedStrings.xml", data: `<sst><si><t>plain</t></si><si><r><t>ri</t></r><r><t>ch</t></r><rPh><t>phonetic</t></rPh></si></sst>`},
		zipEntry{name: "xl/worksheets/sheet1.xml", data: `<worksheet><sheetData><row><c t="s"><v>0</v></c><c t="s"><v>1</v></c><c t="s"><v>99</v></c><c><v>2.5</v></c></row><row><c t="inlineStr"><is><t>inline</t></is></c><c t="str"><f>A1</f><v>formula value</v></c></row></sheetData></worksheet>`},
		zipEntry{name: "xl/worksheets/sheet2.xml", data: `<worksheet><sheetData><row><c t="b"><v>1</v></c></row></sheetData></worksheet>`},
	)
	if k := Kind("", body); k != FormatXLSX {
		t.Fatalf("Kind %q", k)
	}
	doc, err := testExtractor.Extract(t.Context(), "", body, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := "Second\n1\n\nFirst\nplain\trich\t2.5\ninline\tformula value\n"
	if doc.Text != want || doc.Properties.Pages != 2 {
		t.Errorf("text %q (%d sheets), want %q", doc.Text, doc.Properties.Pages, want)
	}
}

// TestDocxNotesHeadersFooters: a docx's footnotes and endnotes, then its
// headers and footers, are read after its body, each part once however
// many sections name it, with their own hyperlinks; a part named but
// missing is skipped.
func TestDocxNotesHeadersFooters(t *testing.T) {
	const ns = `xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"`
	rel := func(id, typ, target string) string {
		return `<Relationship Id="` + id + `" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/` + typ + `" Target="` + target + `"/>`
	}
	part := func(name, root, inner string) zipEntry {
		return zipEntry{name: name, data: `<w:` + root + ` ` + ns + `>` + inner + `</w:` + root + `>`}
	}
	para := func(s string) string { return `<w:p><w:r><w:t>` + s + `</w:t></w:r></w:p>` }
	body := docxWith(t,
		zipEntry{data: `<w:document ` + ns + `><w:body>` + para("Body text") + `</w:body></w:document>`},
		[]string{
			rel("rId1", "header", "header1.xml"), rel("rId2", "header", "header1.xml"), rel("rId3", "footer", "footer1.xml"),
			rel("rId4", "footnotes", "footnotes.xml"), rel("rId5", "endnotes", "endnotes.xml"), rel("rId6", "header", "missing.xml"),
		},
		part("word/header1.xml", "hdr", para("Running head")),
		part("word/footer1.xml", "ftr", para("Page footer")),
		part("word/footnotes.xml", "footnotes", `<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>`+
			`<w:footnote w:id="1"><w:p><w:r><w:t>A footnote, see </w:t></w:r><w:hyperlink r:id="rIdF"><w:r><w:t>the source</w:t></w:r></w:hyperlink></w:p></w:footnote>`),
		zipEntry{name: "word/_rels/footnotes.xml.rels", data: `<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` +
			`<Relationship Id="rIdF" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/hyperlink" Target="https://example.org/source" TargetMode="External"/></Relationships>`},
		part("word/endnotes.xml", "endnotes", `<w:endnote w:id="1">`+para("An endnote")+`</w:endnote>`),
	)
	doc, err := testExtractor.Extract(t.Context(), "", body, nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Body text\nA footnote, see the source\nAn endnote\nRunning head\nPage footer\n"; doc.Text != want {
		t.Errorf("text %q, want %q", doc.Text, want)
	}
	if want := []string{"https://example.org/source"}; !slices.Equal(doc.Links, want) {
		t.Errorf("links %q, want %q", doc.Links, want)
	}
}

// TestXLSXDates: a number shown by a date or time style (built-in or a
// format code of the workbook's own) is its date, in the workbook's date
// system; other numbers, and numbers in styles that are not dates, stay
// numbers.
func TestXLSXDates(t *testing.T) {
	rel := func(id, typ, target string) string {
		return `<Relationship Id="` + id + `" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/` + typ + `" Target="` + target + `"/>`
	}
	rels := func(r ...string) string {
		return `<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">` + strings.Join(r, "") + `</Relationships>`
	}
	styles := `<styleSheet><numFmts><numFmt numFmtId="164" formatCode="yyyy\-mm\-dd\ hh:mm"/><numFmt numFmtId="165" formatCode="0.00&quot; days&quot;"/>` +
		`<numFmt numFmtId="166" formatCode="[$-409]mmm\ d"/></numFmts>` +
		`<cellStyleXfs count="1"><xf numFmtId="14"/></cellStyleXfs>` + // not cell styles: ignored
		`<cellXfs><xf numFmtId="0"/><xf numFmtId="14"/><xf numFmtId="164"/><xf numFmtId="165"/><xf numFmtId="20"/><xf numFmtId="166"/></cellXfs></styleSheet>`
	book := func(pr string) []byte {
		return buildZip(t,
			zipEntry{name: "_rels/.rels", data: rels(rel("rId1", "officeDocument", "xl/workbook.xml"))},
			zipEntry{name: "xl/workbook.xml", data: `<workbook xmlns:r="r">` + pr + `<sheets><sheet name="S" r:id="rId1"/></sheets></workbook>`},
			zipEntry{name: "xl/_rels/workbook.xml.rels", data: rels(rel("rId1", "worksheet", "worksheets/sheet1.xml"), rel("rId2", "styles", "styles.xml"))},
			zipEntry{name: "xl/styles.xml", data: styles},
			zipEntry{name: "xl/worksheets/sheet1.xml", data: `<worksheet><sheetData><row>` +
				`<c s="0"><v>45352</v></c><c s="1"><v>45352</v></c><c s="2"><v>45352.5625</v></c><c s="3"><v>2.5</v></c>` +
				`<c s="4"><v>0.75</v></c><c s="5"><v>45352</v></c><c s="1" t="str"><v>not a date</v></c><c s="9"><v>7</v></c>` +
				`</row></sheetData></worksheet>`},
		)
	}
	for _, tt := range []struct{ name, pr, want string }{
		{"1900 system", "", "S\n45352\t2024-03-01\t2024-03-01 13:30:00\t2.5\t18:00:00\t2024-03-01\tnot a date\t7\n"},
		{"1904 system", `<workbookPr date1904="1"/>`, "S\n45352\t2028-03-02\t2028-03-02 13:30:00\t2.5\t1904-01-01 18:00:00\t2028-03-02\tnot a date\t7\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			doc, err := testExtractor.Extract(t.Context(), "", book(tt.pr), nil, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if doc.Text != tt.want {
				t.Errorf("text %q, want %q", doc.Text, tt.want)
			}
		})
	}
}
