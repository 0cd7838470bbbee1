package chexport_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

// fieldDocs is a crawl whose extraction rules took fields of every type
// from its pages: a product page (a string with a quote and a comma, a
// number, a date, a URL, a list of URLs), another product page with
// another set (its number whole, a list of strings, a field that is a
// string here and a number there, a field whose name has a comma), a PDF without fields but with its own
// properties, a page no rule matched, a page stored twice whose earlier
// version had a field the latest has not, and a page carried over from an
// earlier crawl whose document has a field of its own.
type fieldDoc struct {
	url, fields, properties string
}

var fieldDocs = []fieldDoc{
	{"http://a.test/p/1", `{"name":"Lamp \"Arc\", brass","price":25.5,"released":"2024-05-17T10:30:00Z","link":"http://a.test/p/1?v=2",` +
		`"images":["http://a.test/1.png","http://a.test/2.png"],"code":"7"}`, ""},
	{"http://a.test/p/2", `{"name":"Kettle","price":19,"tags":["steel","1.7 l"],"code":7,"size, cm":"40"}`, ""},
	{"http://a.test/doc.pdf", "", `{"author":"Ann Example","created":"2024-01-02T03:04:05Z","pages":12}`},
	{"http://a.test/about", "", ""},
	{"http://a.test/p/3", `{"name":"Stool, oak"}`, ""}, // its earlier version: {"old_only":"x"}
	{"http://a.test/carried", `{"isbn":"978-3-16-148410-0"}`, ""},
}

// wantFieldColumns are the field columns of fieldDocs' export, sorted,
// and the text of each document's value in CSV ("" for none).
var wantFieldColumns = []string{"fields.code", "fields.images", "fields.isbn", "fields.link", "fields.name", "fields.price",
	"fields.released", "fields.size, cm", "fields.tags"}

var wantFieldText = map[string][]string{
	"http://a.test/p/1": {"7", `["http://a.test/1.png","http://a.test/2.png"]`, "", "http://a.test/p/1?v=2", `Lamp "Arc", brass`,
		"25.5", "2024-05-17T10:30:00Z", "", ""},
	"http://a.test/p/2":     {"7", "", "", "", "Kettle", "19", "", "40", `["steel","1.7 l"]`},
	"http://a.test/doc.pdf": {"", "", "", "", "", "", "", "", ""},
	"http://a.test/about":   {"", "", "", "", "", "", "", "", ""},
	"http://a.test/p/3":     {"", "", "", "", "Stool, oak", "", "", "", ""},
	"http://a.test/carried": {"", "", "978-3-16-148410-0", "", "", "", "", "", ""},
}

// insertFieldDocs writes fieldDocs as crawl "fields" (and the earlier
// crawl "fields-0" it carried one page over from).
func insertFieldDocs(t *testing.T, s *chstore.Store) {
	t.Helper()
	var docs []chstore.DocumentRow
	for i, d := range fieldDocs[:5] {
		ct := "text/html"
		if strings.HasSuffix(d.url, ".pdf") {
			ct = "application/pdf"
		}
		docs = append(docs, chstore.DocumentRow{CrawlID: "fields", URL: d.url, URLFP: uint64(i + 1), Host: "a.test",
			FetchedAt: base.Add(time.Hour), Status: 200, Title: d.url, ContentType: ct, Fields: d.fields, Properties: d.properties})
	}
	insert(t, s, chstore.Documents, docs...)
	// p/3's earlier version, stored before: its field must not be a column.
	insert(t, s, chstore.Documents, chstore.DocumentRow{CrawlID: "fields", URL: "http://a.test/p/3", URLFP: 5, Host: "a.test",
		FetchedAt: base, Status: 200, Title: "earlier", ContentType: "text/html", Fields: `{"old_only":"x"}`})
	c := fieldDocs[5]
	insert(t, s, chstore.Documents, chstore.DocumentRow{CrawlID: "fields-0", URL: c.url, URLFP: 60, Host: "a.test",
		FetchedAt: base, Status: 200, Title: c.url, ContentType: "text/html", Fields: c.fields})
	insert(t, s, chstore.DocumentsCarried, chstore.CarriedRow{CrawlID: "fields", URL: c.url, URLFP: 6, Host: "a.test",
		FromCrawl: "fields-0", FromURLFP: 60, CheckedAt: base.Add(time.Hour)})
}

// TestDocumentFields exports fieldDocs in every format and checks each
// document's fields and properties value by value: in JSON lines the
// objects themselves ({} for none), in CSV a column per field name (the
// union of the names, sorted, after the other columns) holding the text
// of each value, in Parquet the same columns, optional, DOUBLE for a field
// whose every value is a number and STRING for the others, null where a
// document has no value; properties a JSON text in CSV and Parquet.
func TestDocumentFields(t *testing.T) {
	s := chtest.NewStore(t)
	insertFieldDocs(t, s)
	byURL := make(map[string]fieldDoc)
	for _, d := range fieldDocs {
		byURL[d.url] = d
	}
	exportFields := func(t *testing.T, f chexport.Format) []byte {
		return exportRows(t, s, chexport.Request{CrawlID: "fields", Format: f}, int64(len(fieldDocs)))
	}

	t.Run("jsonl", func(t *testing.T) {
		out := exportFields(t, chexport.JSONL)
		seen := 0
		for line := range strings.Lines(string(out)) {
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("json line %q: %v", line, err)
			}
			var url string
			if err := json.Unmarshal(m["url"], &url); err != nil {
				t.Fatal(err)
			}
			d, ok := byURL[url]
			if !ok {
				t.Fatalf("unexpected document %s", url)
			}
			seen++
			for key, want := range map[string]string{"fields": d.fields, "properties": d.properties} {
				if want == "" {
					want = "{}"
				}
				if !sameJSON(t, m[key], want) {
					t.Errorf("%s: %s = %s, want %s", url, key, m[key], want)
				}
			}
		}
		if seen != len(fieldDocs) {
			t.Errorf("%d documents, want %d", seen, len(fieldDocs))
		}
	})

	t.Run("csv", func(t *testing.T) {
		recs, err := csv.NewReader(bytes.NewReader(exportFields(t, chexport.CSV))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		static := csvColumns[chexport.DocumentRow]()
		if want := slices.Concat(static, wantFieldColumns); !reflect.DeepEqual(recs[0], want) {
			t.Fatalf("csv header %q, want %q", recs[0], want)
		}
		props := slices.Index(recs[0], "properties")
		for _, rec := range recs[1:] {
			url := rec[1]
			if got, want := rec[len(static):], wantFieldText[url]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: fields %q, want %q", url, got, want)
			}
			if got, want := rec[props], byURL[url].properties; got != want {
				t.Errorf("%s: properties %q, want %q", url, got, want)
			}
		}
		if len(recs)-1 != len(fieldDocs) {
			t.Errorf("%d records, want %d", len(recs)-1, len(fieldDocs))
		}
	})

	t.Run("parquet", func(t *testing.T) {
		out := exportFields(t, chexport.Parquet)
		file, err := parquet.OpenFile(bytes.NewReader(out), int64(len(out)))
		if err != nil {
			t.Fatal(err)
		}
		static := csvColumns[chexport.DocumentRow]()
		var names []string
		types := map[string]string{}
		for _, f := range file.Schema().Fields() {
			names = append(names, f.Name())
			types[f.Name()] = f.Type().String()
			if strings.HasPrefix(f.Name(), "fields.") && !f.Optional() {
				t.Errorf("column %s is not optional", f.Name())
			}
		}
		if want := slices.Concat(static, wantFieldColumns); !reflect.DeepEqual(names, want) {
			t.Fatalf("parquet columns %q, want %q", names, want)
		}
		for _, col := range wantFieldColumns {
			want := "STRING"
			if col == "fields.price" {
				want = "DOUBLE"
			}
			if types[col] != want {
				t.Errorf("column %s: %s, want %s", col, types[col], want)
			}
		}
		rows := readParquetRows(t, file)
		if len(rows) != len(fieldDocs) {
			t.Fatalf("%d rows, want %d", len(rows), len(fieldDocs))
		}
		for _, row := range rows {
			url := row["url"].String()
			if got, want := row["properties"].String(), byURL[url].properties; got != want {
				t.Errorf("%s: properties %q, want %q", url, got, want)
			}
			for i, col := range wantFieldColumns {
				v, want := row[col], wantFieldText[url][i]
				switch {
				case want == "":
					if !v.IsNull() {
						t.Errorf("%s: %s = %v, want null", url, col, v)
					}
				case col == "fields.price":
					if v.Kind() != parquet.Double || !reflect.DeepEqual(map[string]float64{"25.5": 25.5, "19": 19}[want], v.Double()) {
						t.Errorf("%s: %s = %v (%v), want the DOUBLE %s", url, col, v, v.Kind(), want)
					}
				default:
					if v.IsNull() || v.String() != want {
						t.Errorf("%s: %s = %v, want %q", url, col, v, want)
					}
				}
			}
		}
		// The static columns read back into DocumentRow as before.
		docs, err := parquet.Read[chexport.DocumentRow](bytes.NewReader(out), int64(len(out)))
		if err != nil || len(docs) != len(fieldDocs) {
			t.Fatalf("read back %d documents (%v), want %d", len(docs), err, len(fieldDocs))
		}
		for _, d := range docs {
			if d.Title != d.URL || string(d.Properties) != byURL[d.URL].properties {
				t.Errorf("%s read back as title %q, properties %q", d.URL, d.Title, d.Properties)
			}
		}
	})

	t.Run("duckdb", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "fields.parquet")
		out, err := chexport.CreateOutput(file)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if _, err := chexport.Export(t.Context(), s.Conn(), chexport.Request{CrawlID: "fields", Format: chexport.Parquet}, out); err != nil {
			t.Fatal(err)
		}
		if err := out.Commit(); err != nil {
			t.Fatal(err)
		}
		res := readWithDuckDB(t, file)
		types := map[string]string{}
		for _, c := range res.Columns {
			types[c.Name] = c.Type
		}
		for _, col := range wantFieldColumns {
			want := "VARCHAR"
			if col == "fields.price" {
				want = "DOUBLE"
			}
			if types[col] != want {
				t.Errorf("duckdb type of %s = %q, want %q", col, types[col], want)
			}
		}
		if len(res.Values) != len(fieldDocs) {
			t.Fatalf("duckdb read %d rows, want %d", len(res.Values), len(fieldDocs))
		}
		for _, row := range res.Values {
			if row["url"] == nil {
				t.Fatal("duckdb read a row without a url")
			}
			url := *row["url"]
			for i, col := range wantFieldColumns {
				want := wantFieldText[url][i]
				if col == "fields.price" && want != "" {
					want = map[string]string{"25.5": "25.5", "19": "19.0"}[want]
				}
				if got := row[col]; want == "" && got != nil || want != "" && (got == nil || *got != want) {
					t.Errorf("duckdb %s: %s = %s, want %q", url, col, deref(got), want)
				}
			}
			if got := row["properties"]; got == nil || *got != byURL[url].properties {
				t.Errorf("duckdb %s: properties = %s, want %q", url, deref(got), byURL[url].properties)
			}
		}
	})
}

// TestDocumentsWithoutFields: a crawl without extraction rules exports
// no field column in CSV and Parquet, and {} in JSON lines.
func TestDocumentsWithoutFields(t *testing.T) {
	s := chtest.NewStore(t)
	f := insertFixture(t, s, "no-fields", 1)
	out := export(t, s, chexport.Request{CrawlID: f.crawl, Format: chexport.CSV})
	header, _, _ := strings.Cut(string(out), "\r\n")
	if strings.Contains(header, "fields") {
		t.Errorf("csv header %q has a field column", header)
	}
	out = export(t, s, chexport.Request{CrawlID: f.crawl, Format: chexport.JSONL})
	for line := range strings.Lines(string(out)) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		if string(m["fields"]) != "{}" {
			t.Errorf("fields = %s, want {}", m["fields"])
		}
	}
}

// readParquetRows reads every row of a flat Parquet file, each as its
// values by column name.
func readParquetRows(t *testing.T, file *parquet.File) []map[string]parquet.Value {
	t.Helper()
	var names []string // the columns, by index: the schema is flat
	for _, f := range file.Schema().Fields() {
		names = append(names, f.Name())
	}
	var out []map[string]parquet.Value
	for _, g := range file.RowGroups() {
		rows := g.Rows()
		buf := make([]parquet.Row, 16)
		for {
			n, err := rows.ReadRows(buf)
			for _, row := range buf[:n] {
				m := make(map[string]parquet.Value)
				for _, v := range row {
					m[names[v.Column()]] = v.Clone()
				}
				out = append(out, m)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
	}
	return out
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a []byte, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
