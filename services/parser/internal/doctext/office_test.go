package doctext

import (
	"net/url"
	"slices"
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
