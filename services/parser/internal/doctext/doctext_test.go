package doctext

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"
)

func TestKind(t *testing.T) {
	tests := []struct {
		name, contentType, file string
		body                    string
		want                    string
	}{
		{name: "pdf by type", contentType: "application/pdf", body: "anything", want: FormatPDF},
		{name: "pdf with params", contentType: "Application/PDF; charset=binary", body: "", want: FormatPDF},
		{name: "docx by type", contentType: "application/vnd.openxmlformats-officedocument.wordprocessingml.document", want: FormatDOCX},
		{name: "ods by type", contentType: "application/vnd.oasis.opendocument.spreadsheet", want: FormatODS},
		{name: "html is not ours", contentType: "text/html", body: "%PDF-1.4", want: ""},
		{name: "pdf by bytes", contentType: "application/octet-stream", file: "report.pdf", want: FormatPDF},
		{name: "pdf after junk", contentType: "", body: "\x00\x01junk%PDF-1.7\n", want: FormatPDF},
		{name: "docx by bytes", contentType: "application/octet-stream", file: "report.docx", want: FormatDOCX},
		{name: "xlsx by bytes", contentType: "application/zip", file: "sales.xlsx", want: FormatXLSX},
		{name: "pptx by bytes", contentType: "", file: "deck.pptx", want: FormatPPTX},
		{name: "odt by bytes", contentType: "", file: "report.odt", want: FormatODT},
		{name: "ods by bytes", contentType: "binary/octet-stream", file: "sales.ods", want: FormatODS},
		{name: "odp by bytes", contentType: "", file: "deck.odp", want: FormatODP},
		{name: "other zip", contentType: "application/zip", body: "PK\x03\x04garbage", want: ""},
		{name: "nothing", contentType: "", body: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			if tt.file != "" {
				body = readCorpus(t, tt.file)
			}
			if got := Kind(tt.contentType, body); got != tt.want {
				t.Errorf("Kind(%q) = %q, want %q", tt.contentType, got, tt.want)
			}
		})
	}
}

// TestCorpus reads the documents made from the sources in
// testdata/corpus/src and checks their words, order, metadata and links
// against the sources.
func TestCorpus(t *testing.T) {
	src := func(name string) []string {
		b, err := os.ReadFile(filepath.Join("testdata", "corpus", "src", name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".csv") {
			// A sheet shows numbers as numbers: 12.50 is 12.5.
			rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
			if err != nil {
				t.Fatal(err)
			}
			var cells []string
			for _, row := range rows {
				for _, c := range row {
					if f, err := strconv.ParseFloat(c, 64); err == nil {
						c = strconv.FormatFloat(f, 'f', -1, 64)
					}
					cells = append(cells, c)
				}
			}
			return words(strings.Join(cells, " "))
		}
		return words(sourceText(string(b)))
	}
	chapters := []string{"https://example.org/chapter/1", "https://example.org/chapter/2", "https://example.org/chapter/3", "https://example.org/chapter/4", "https://example.org/chapter/5"}
	var pdfReportLinks []string
	for i := range chapters {
		pdfReportLinks = append(pdfReportLinks, chapters[i], strings.Replace(chapters[i], "example.org/chapter", "example.com/plain", 1))
	}
	tests := []struct {
		file, source string
		title        string
		author       string
		pages        int
		links        []string
		phrases      []string
	}{
		{"report.pdf", "report.html", "Trawl Reference Report", "Ada Lovelace", 6, pdfReportLinks, []string{"Chapter 3: Section marker3alpha", "Crème brûlée, Ærøskøbing, Łódź", "网络爬虫是一种按照一定的规则", "item23"}},
		{"report.docx", "report.html", "Trawl Reference Report", "Ada Lovelace", 6, chapters, []string{"Chapter 3: Section marker3alpha", "Crème brûlée, Ærøskøbing, Łódź", "网络爬虫是一种按照一定的规则", "item23\t21\t9.50"}},
		{"report.odt", "report.html", "Trawl Reference Report", "Ada Lovelace", 6, chapters, []string{"Chapter 3: Section marker3alpha", "Crème brûlée, Ærøskøbing, Łódź", "网络爬虫是一种按照一定的规则", "item23\t21\t9.50"}},
		{"columns.pdf", "columns.fodt", "Two Column Field Notes", "Grace Hopper", 2, []string{"https://example.net/notes"}, []string{"Closing remark after the columns"}},
		{"columns.docx", "columns.fodt", "Two Column Field Notes", "Grace Hopper", 0, []string{"https://example.net/notes"}, []string{"Closing remark after the columns"}},
		{"columns.odt", "columns.fodt", "Two Column Field Notes", "Grace Hopper", 1, []string{"https://example.net/notes"}, []string{"Closing remark after the columns"}},
		{"deck.pdf", "deck.fodp", "Quarterly Deck", "Alan Turing", 3, []string{"https://example.com/slides"}, []string{"Roadmap Überblick\n", "总结 Summary"}},
		{"deck.pptx", "deck.fodp", "Quarterly Deck", "Alan Turing", 3, nil, []string{"Quarterly Overview\nRevenue grew", "markers one.\n\nRoadmap Überblick\n", "总结 Summary"}},
		{"deck.odp", "deck.fodp", "Quarterly Deck", "Alan Turing", 3, nil, []string{"Quarterly Overview\nRevenue grew", "markers one.\n\nRoadmap Überblick\n", "总结 Summary"}},
		{"sales.xlsx", "sales.csv", "", "", 1, nil, []string{"Product\tRegion\tUnits\tRevenue\n", "widget03\t西部\t9\t37.5\n", "widget40\tNorth\t120\t500\n"}},
		{"sales.ods", "sales.csv", "", "", 1, nil, []string{"Product\tRegion\tUnits\tRevenue\n", "widget03\t西部\t9\t37.5\n", "widget40\tNorth\t120\t500\n"}},
	}
	base, _ := url.Parse("https://docs.example.com/files/x")
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			doc, err := testExtractor.Extract(t.Context(), "", readCorpus(t, tt.file), base, Limits{})
			if err != nil {
				t.Fatalf("Extract: %v", err)
			}
			if doc.Title != tt.title || doc.Properties.Author != tt.author || doc.Properties.Pages != tt.pages {
				t.Errorf("title %q author %q pages %d, want %q %q %d", doc.Title, doc.Properties.Author, doc.Properties.Pages, tt.title, tt.author, tt.pages)
			}
			if !slices.Equal(doc.Links, tt.links) {
				t.Errorf("links %q, want %q", doc.Links, tt.links)
			}
			for _, p := range tt.phrases {
				if !strings.Contains(doc.Text, p) {
					t.Errorf("text lacks %q", p)
				}
			}
			ref, got := src(tt.source), words(doc.Text)
			if tt.source == "sales.csv" {
				// A sheet's text starts with its name.
				ref = append([]string{"sales"}, ref...)
			}
			ws, bs := wordShare(ref, got), bigramShare(ref, got)
			t.Logf("%s: %d words, %.1f %% of the source's, %.1f %% of its bigrams", tt.file, len(got), 100*ws, 100*bs)
			if ws < 0.99 || bs < 0.97 {
				t.Errorf("%.3f of the source's words and %.3f of its bigrams, want ≥ 0.99 and ≥ 0.97", ws, bs)
			}
			// No more words than the source either (nothing doubled).
			if extra := wordShare(got, ref); extra < 0.98 {
				t.Errorf("only %.3f of the words read are the source's", extra)
			}
			if !utf8.ValidString(doc.Text) {
				t.Error("text is not UTF-8")
			}
		})
	}
}

func TestProperties(t *testing.T) {
	doc, err := testExtractor.Extract(t.Context(), "application/vnd.oasis.opendocument.text", readCorpus(t, "columns.odt"), nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(doc.Properties)
	if err != nil {
		t.Fatal(err)
	}
	// The source says: created 2024-03-05T10:20:30 (no zone).
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got["created"] != "2024-03-05T10:20:30Z" || got["author"] != "Grace Hopper" {
		t.Errorf("properties %s", b)
	}
	if _, ok := got["modified"]; ok && doc.Properties.Modified.IsZero() {
		t.Errorf("zero modified time in JSON: %s", b)
	}
	pdf, err := testExtractor.Extract(t.Context(), "application/pdf", readCorpus(t, "debian-libtasn1.pdf"), nil, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if pdf.Properties.Pages != 36 || pdf.Properties.Producer != "pdfTeX-1.40.24" || pdf.Properties.Creator != "TeX" || pdf.Properties.Created.IsZero() {
		t.Errorf("pdf properties %+v", pdf.Properties)
	}
}

func TestParsePDFDate(t *testing.T) {
	tests := []struct{ in, want string }{
		{"D:20240305102030+01'00'", "2024-03-05T10:20:30+01:00"},
		{"D:20240305102030Z", "2024-03-05T10:20:30Z"},
		{"D:20240305102030-05'30", "2024-03-05T10:20:30-05:30"},
		{"D:2024", "2024-01-01T00:00:00Z"},
		{"20240305", "2024-03-05T00:00:00Z"},
		{"D:20241305", ""},
		{"yesterday", ""},
	}
	for _, tt := range tests {
		got := parsePDFDate(tt.in)
		s := ""
		if !got.IsZero() {
			s = got.Format("2006-01-02T15:04:05Z07:00")
		}
		if s != tt.want {
			t.Errorf("parsePDFDate(%q) = %q, want %q", tt.in, s, tt.want)
		}
	}
}

func TestLimits(t *testing.T) {
	for _, file := range []string{"report.pdf", "report.docx", "report.odt", "sales.xlsx", "deck.pptx"} {
		t.Run(file+" text", func(t *testing.T) {
			doc, err := testExtractor.Extract(t.Context(), "", readCorpus(t, file), nil, Limits{MaxTextBytes: 100})
			if err != nil {
				t.Fatal(err)
			}
			if !doc.Truncated || len(doc.Text) > 100 || len(doc.Text) < 50 || !utf8.ValidString(doc.Text) {
				t.Errorf("truncated %v, %d bytes: %q", doc.Truncated, len(doc.Text), doc.Text)
			}
		})
	}
	t.Run("pages", func(t *testing.T) {
		full, err := testExtractor.Extract(t.Context(), "", readCorpus(t, "deck.pptx"), nil, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		two, err := testExtractor.Extract(t.Context(), "", readCorpus(t, "deck.pptx"), nil, Limits{MaxPages: 2})
		if err != nil {
			t.Fatal(err)
		}
		if !two.Truncated || !strings.Contains(two.Text, "giraffe") || strings.Contains(two.Text, "pelican") || !strings.Contains(full.Text, "pelican") {
			t.Errorf("two slides: truncated %v %q", two.Truncated, two.Text)
		}
		pdf, err := testExtractor.Extract(t.Context(), "", readCorpus(t, "report.pdf"), nil, Limits{MaxPages: 1})
		if err != nil {
			t.Fatal(err)
		}
		if !pdf.Truncated || !strings.Contains(pdf.Text, "marker1alpha") || strings.Contains(pdf.Text, "marker2alpha") {
			t.Errorf("one page: truncated %v, %d bytes", pdf.Truncated, len(pdf.Text))
		}
	})
}

// TestLazyPDF: an Extractor that reads no PDF starts no PDF runtime.
func TestLazyPDF(t *testing.T) {
	e := New(Config{})
	defer e.Close()
	if _, err := e.Extract(t.Context(), "", readCorpus(t, "report.docx"), nil, Limits{}); err != nil {
		t.Fatal(err)
	}
	if e.pdf != nil {
		t.Error("reading a docx started the PDF runtime")
	}
}

// TestClose: an Extractor that read PDFs leaves no goroutine behind once
// closed, and refuses PDFs after.
func TestClose(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	e := New(Config{CacheDir: testExtractor.cfg.CacheDir, PDFWorkers: 2})
	var wg sync.WaitGroup
	for _, f := range []string{"deck.pdf", "columns.pdf", "report.pdf", "sales.xlsx"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.Extract(t.Context(), "", readCorpus(t, f), nil, Limits{}); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}()
	}
	wg.Wait()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Extract(t.Context(), "", readCorpus(t, "deck.pdf"), nil, Limits{}); ErrorKind(err) != KindUnsupported {
		t.Errorf("after Close: %v", err)
	}
}

// TestPanicRecovered: a panic inside Extract (here context.WithTimeout's,
// on a nil context) is an error of kind panic, not a crash.
func TestPanicRecovered(t *testing.T) {
	var ctx context.Context
	_, err := testExtractor.Extract(ctx, "", readCorpus(t, "report.docx"), nil, Limits{})
	if ErrorKind(err) != KindPanic || !strings.Contains(err.Error(), "nil parent") {
		t.Errorf("err %v, want kind panic", err)
	}
}
