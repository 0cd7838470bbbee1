package doctypes

import (
	"reflect"
	"testing"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

func TestExpand(t *testing.T) {
	got, err := Expand([]string{"docx", " PDF ", "application/pdf", "odt"})
	if want := []string{PDF, DOCX, ODT}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Expand = %v, %v; want %v", got, err, want)
	}
	if got, err := Expand([]string{"office"}); err != nil || len(got) != 6 || got[0] != DOCX {
		t.Errorf("Expand(office) = %v, %v; want the six office types", got, err)
	}
	if _, err := Expand([]string{"image/png"}); err == nil {
		t.Error("Expand(image/png): no error; the parsers cannot read it")
	}
	if got, err := Expand(nil); err != nil || got != nil {
		t.Errorf("Expand(nil) = %v, %v", got, err)
	}
}

func TestKeptTypeOfASpecAndValidate(t *testing.T) {
	d := &crawlv1.Documents{ContentTypes: []string{PDF}}
	kept := d.GetContentTypes()
	if KeptType(kept, PDF, "") != PDF || KeptType(kept, DOCX, "") != "" || KeptType(nil, PDF, "") != "" || KeptType(kept, "", "") != "" {
		t.Error("KeptType: wrong answer for a crawl keeping PDFs only")
	}
	if !Generic("application/octet-stream") || Generic(PDF) || Generic("") {
		t.Error("Generic: wrong answer")
	}
	if Validate(d) != nil || Validate(nil) != nil {
		t.Error("Validate refused a known type")
	}
	if Validate(&crawlv1.Documents{ContentTypes: []string{"pdf"}}) == nil {
		t.Error("Validate accepted a short name in a specification (the seeder expands them)")
	}
	if Short(PDF) != "pdf" || Short(XLSX) != "xlsx" || Short("text/html") != "text/html" {
		t.Error("Short: wrong names")
	}
}

func TestKeptType(t *testing.T) {
	d := []string{PDF, DOCX}
	for _, c := range []struct{ mt, path, want string }{
		{PDF, "/x", PDF},
		{"application/octet-stream", "/files/Manual.PDF", PDF},
		{"", "/spec.docx", DOCX},
		{"binary/octet-stream", "/sheet.xlsx", ""},
		{"text/html", "/manual.pdf", ""},
		{"application/octet-stream", "/dir.pdf/file", ""},
		{"application/octet-stream", "/noext", ""},
	} {
		if got := KeptType(d, c.mt, c.path); got != c.want {
			t.Errorf("KeptType(%q, %q) = %q, want %q", c.mt, c.path, got, c.want)
		}
	}
}
