package chexport_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.MainLeakChecked(m)) }

// base is second-aligned: ClickHouse DateTime keeps whole seconds.
var base = time.Date(2024, 5, 17, 10, 30, 0, 0, time.UTC)

// tricky are texts that CSV must quote and JSON escape.
var tricky = []string{
	"", "plain", "comma, inside", `quote " inside`, "line\nbreak", " leading space", "tab\there",
	"ünïcödé — 中文 ✓", "<b>html & amp</b>", `"`, "trailing\n",
}

// fixture is one crawl's rows of every table, inserted through chstore's
// writers, and the rows the export must give back, in its order.
type fixture struct {
	crawl     string
	documents []chexport.DocumentRow
	fetchLog  []chexport.FetchLogRow
	links     []chexport.LinkRow
	urlEvents []chexport.URLEventRow
}

const fixtureRows = 11 // len(tricky)

func newFixture(crawl string) (fixture, []chstore.DocumentRow, []chstore.FetchLogRow, []chstore.LinkRow, []chstore.URLEventRow) {
	f := fixture{crawl: crawl}
	var (
		docs   []chstore.DocumentRow
		fetch  []chstore.FetchLogRow
		links  []chstore.LinkRow
		events []chstore.URLEventRow
	)
	for i := range fixtureRows {
		text := tricky[i%len(tricky)]
		url := fmt.Sprintf("http://a.test/%03d/h%d?q=%s", i, i%3, strconv.Itoa(i))
		// Fingerprints above 2^63: an unsigned column must not turn negative.
		fp := uint64(i)*0x9e3779b97f4a7c15 | 1<<63
		at := base.Add(time.Duration(i) * time.Minute)
		d := chstore.DocumentRow{CrawlID: crawl, URL: url, URLFP: fp, Host: fmt.Sprintf("h%d.test", i%3), FetchedAt: at,
			Status: 200, Title: "title " + text, Text: text, ContentFP: ^fp, Outlinks: uint32(i * 7), ContentType: "text/html",
			Language: []string{"en", "de", ""}[i%3], LanguageDetected: []string{"en", "", "fr"}[i%3]}
		if i%3 == 2 { // a PDF's own metadata
			props, _ := json.Marshal(map[string]any{"author": text, "pages": i})
			d.Properties = string(props)
		}
		if i%2 == 1 {
			item, _ := json.Marshal(map[string]string{"@type": "Product", "name": text})
			og, _ := json.Marshal(map[string]string{"og:title": text})
			md, _ := json.Marshal(map[string]any{"@type": "https://schema.org/Person", "name": []string{text, "b"}})
			d.JSONLD, d.OpenGraph, d.Microdata = "["+string(item)+"]", string(og), "["+string(md)+"]"
		}
		docs = append(docs, d)
		f.documents = append(f.documents, chexport.DocumentRow{CrawlID: d.CrawlID, URL: d.URL, URLFP: d.URLFP, Host: d.Host,
			FetchedAt: d.FetchedAt, Status: d.Status, Title: d.Title, Text: d.Text, ContentFP: d.ContentFP, Outlinks: d.Outlinks,
			ContentType: d.ContentType, Language: d.Language, JSONLD: chexport.JSONArray(d.JSONLD), OpenGraph: chexport.JSONObject(d.OpenGraph),
			LanguageDetected: d.LanguageDetected, Microdata: chexport.JSONArray(d.Microdata), Properties: chexport.JSONObject(d.Properties)})

		fat := at.Add(time.Duration(i*37) * time.Millisecond)
		fl := chstore.FetchLogRow{CrawlID: crawl, URL: url, URLFP: fp, Host: d.Host, Partition: uint16(i % 8), Attempt: uint16(1 + i%2),
			FetchedAt: fat.Truncate(time.Second), FetchedAtMs: chstore.Millis(fat), Status: []uint16{200, 404, 0}[i%3],
			ErrorKind: []string{"", "", "timeout"}[i%3], ErrorMessage: text, Bytes: uint64(1000 * i), ContentType: "text/html",
			DurationMs: uint32(10 + i), RedirectLocation: "", Depth: uint16(i % 4), Fetcher: "f-1", Final: i%2 == 0,
			WarcFile: "", WarcOffset: uint64(i) << 40, Priority: int32(i%7) - 3, PriorityReason: []string{"", "rule", "rule+inlinks"}[i%3]}
		fetch = append(fetch, fl)
		f.fetchLog = append(f.fetchLog, chexport.FetchLogRow{CrawlID: fl.CrawlID, URL: fl.URL, URLFP: fl.URLFP, Host: fl.Host,
			Partition: fl.Partition, Attempt: fl.Attempt, FetchedAt: fat, Status: fl.Status, ErrorKind: fl.ErrorKind,
			ErrorMessage: fl.ErrorMessage, Bytes: fl.Bytes, ContentType: fl.ContentType, DurationMs: fl.DurationMs,
			RedirectLocation: fl.RedirectLocation, Depth: fl.Depth, Fetcher: fl.Fetcher, Final: fl.Final, WarcFile: fl.WarcFile,
			WarcOffset: fl.WarcOffset, Priority: fl.Priority, PriorityReason: fl.PriorityReason})

		l := chstore.LinkRow{CrawlID: crawl, TargetHost: "t.test", TargetURL: "http://t.test/" + strconv.Itoa(i), TargetFP: ^fp,
			SourceHost: d.Host, SourceURL: url, SourceFP: fp, Position: uint16(i + 1), AnchorText: text, Rel: "nofollow",
			Tag: "a", Depth: uint16(i%4 + 1), FoundAt: at}
		links = append(links, l)
		f.links = append(f.links, chexport.LinkRow{CrawlID: l.CrawlID, SourceURL: l.SourceURL, SourceFP: l.SourceFP,
			SourceHost: l.SourceHost, Position: l.Position, TargetURL: l.TargetURL, TargetFP: l.TargetFP, TargetHost: l.TargetHost,
			AnchorText: l.AnchorText, Rel: l.Rel, Tag: l.Tag, Depth: l.Depth, FoundAt: l.FoundAt})

		e := chstore.URLEventRow{CrawlID: crawl, URL: url + "&e", URLFP: fp, Host: d.Host, Partition: uint16(i % 8),
			State: []string{"duplicate", "out_of_scope"}[i%2], Reason: text, Depth: uint16(i % 5), EventTime: at,
			Priority: int32(i % 4), PriorityReason: []string{"", "inlinks", "sitemap"}[i%3]}
		events = append(events, e)
		f.urlEvents = append(f.urlEvents, chexport.URLEventRow{CrawlID: e.CrawlID, URL: e.URL, URLFP: e.URLFP, Host: e.Host,
			Partition: e.Partition, State: e.State, Reason: e.Reason, Depth: e.Depth, EventTime: e.EventTime,
			Priority: e.Priority, PriorityReason: e.PriorityReason})
	}
	return f, docs, fetch, links, events
}

// insert writes rows through a chstore batch writer and waits until they
// are inserted.
func insert[T any](t *testing.T, s *chstore.Store, table chstore.Table[T], rows ...T) {
	t.Helper()
	w := chstore.NewBatchWriter(s, table, chstore.BatchOptions{MaxRows: 100000, FlushInterval: 10 * time.Millisecond}, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("writer %s: %v", table.Name, err)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	if err := w.Write(t.Context(), rows...); err != nil {
		t.Fatalf("insert %s: %v", table.Name, err)
	}
}

// insertFixture inserts a crawl's rows of every table (times times each:
// a redelivery inserts a row again).
func insertFixture(t *testing.T, s *chstore.Store, crawl string, times int) fixture {
	t.Helper()
	f, docs, fetch, links, events := newFixture(crawl)
	for range times {
		insert(t, s, chstore.Documents, docs...)
		insert(t, s, chstore.FetchLog, fetch...)
		insert(t, s, chstore.Links, links...)
		insert(t, s, chstore.URLEvents, events...)
	}
	return f
}

func (f fixture) want(table chexport.Table) any {
	switch table {
	case chexport.FetchLog:
		return f.fetchLog
	case chexport.Links:
		return f.links
	case chexport.URLEvents:
		return f.urlEvents
	default:
		return f.documents
	}
}

func export(t *testing.T, s *chstore.Store, req chexport.Request) []byte {
	t.Helper()
	return exportRows(t, s, req, fixtureRows)
}

// exportRows exports req and checks that it wrote want rows.
func exportRows(t *testing.T, s *chstore.Store, req chexport.Request, want int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := chexport.Export(t.Context(), s.Conn(), req, &buf)
	if err != nil {
		t.Fatalf("export %+v: %v", req, err)
	}
	if n != want {
		t.Fatalf("export %+v: %d rows, want %d", req, n, want)
	}
	return buf.Bytes()
}

// TestExportRoundTrip exports every table in every format and reads each
// file back (encoding/json, encoding/csv, parquet-go), comparing every
// field of every row with what was inserted, in the export's order.
func TestExportRoundTrip(t *testing.T) {
	s := chtest.NewStore(t)
	f := insertFixture(t, s, "round-trip", 1)
	insertFixture(t, s, "other-crawl", 1) // never exported with round-trip's
	for _, table := range chexport.Tables {
		for _, format := range chexport.Formats {
			t.Run(string(table)+"/"+string(format), func(t *testing.T) {
				out := export(t, s, chexport.Request{CrawlID: f.crawl, Table: table, Format: format})
				want := f.want(table)
				got := readBack(t, table, format, out)
				compareRows(t, want, got)
			})
		}
	}
}

// readBack decodes an export into a slice of the table's row type.
func readBack(t *testing.T, table chexport.Table, format chexport.Format, out []byte) any {
	t.Helper()
	switch table {
	case chexport.FetchLog:
		return decode[chexport.FetchLogRow](t, format, out)
	case chexport.Links:
		return decode[chexport.LinkRow](t, format, out)
	case chexport.URLEvents:
		return decode[chexport.URLEventRow](t, format, out)
	default:
		return decode[chexport.DocumentRow](t, format, out)
	}
}

func decode[T any](t *testing.T, format chexport.Format, out []byte) []T {
	t.Helper()
	var rows []T
	switch format {
	case chexport.JSONL:
		dec := json.NewDecoder(bytes.NewReader(out))
		dec.DisallowUnknownFields()
		for {
			var r T
			if err := dec.Decode(&r); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("decode json line %d: %v", len(rows)+1, err)
			}
			rows = append(rows, r)
		}
		if lines := bytes.Count(out, []byte("\n")); lines != len(rows) {
			t.Errorf("%d lines for %d objects: one object per line wanted", lines, len(rows))
		}
	case chexport.CSV:
		if !bytes.HasSuffix(out, []byte("\r\n")) {
			t.Errorf("csv does not end with CRLF")
		}
		r := csv.NewReader(bytes.NewReader(out))
		recs, err := r.ReadAll()
		if err != nil {
			t.Fatalf("read csv: %v", err)
		}
		if want := csvColumns[T](); !reflect.DeepEqual(recs[0], want) {
			t.Fatalf("csv header %q, want %q", recs[0], want)
		}
		for _, rec := range recs[1:] {
			rows = append(rows, fromStrings[T](t, rec))
		}
	case chexport.Parquet:
		got, err := parquet.Read[T](bytes.NewReader(out), int64(len(out)))
		if err != nil {
			t.Fatalf("read parquet: %v", err)
		}
		rows = got
	}
	return rows
}

// columnNames are T's json tags in field order.
func columnNames[T any]() []string {
	rt := reflect.TypeFor[T]()
	names := make([]string, rt.NumField())
	for i := range names {
		names[i] = rt.Field(i).Tag.Get("json")
	}
	return names
}

// csvColumns are the json tags of T's fields that are a column of their
// own in CSV and Parquet (not DocumentRow.Fields, a column per field: the
// fixture has none), in field order.
func csvColumns[T any]() []string {
	rt := reflect.TypeFor[T]()
	var names []string
	for i := range rt.NumField() {
		if rt.Field(i).Tag.Get("parquet") != "-" {
			names = append(names, rt.Field(i).Tag.Get("json"))
		}
	}
	return names
}

// fromStrings parses a CSV record into T, field i from rec[i] (the fields
// of csvColumns).
func fromStrings[T any](t *testing.T, rec []string) T {
	t.Helper()
	var r T
	v := reflect.ValueOf(&r).Elem()
	if want := len(csvColumns[T]()); len(rec) != want {
		t.Fatalf("csv record has %d fields, want %d: %q", len(rec), want, rec)
	}
	for i, s := range rec {
		fv := v.Field(i)
		var err error
		switch {
		case fv.Type() == reflect.TypeFor[time.Time]():
			var at time.Time
			at, err = time.Parse(time.RFC3339Nano, s)
			fv.Set(reflect.ValueOf(at))
		case fv.Kind() == reflect.String:
			fv.SetString(s)
		case fv.Kind() == reflect.Bool:
			var b bool
			b, err = strconv.ParseBool(s)
			fv.SetBool(b)
		case fv.CanInt():
			var n int64
			n, err = strconv.ParseInt(s, 10, fv.Type().Bits())
			fv.SetInt(n)
		default:
			var u uint64
			u, err = strconv.ParseUint(s, 10, fv.Type().Bits())
			fv.SetUint(u)
		}
		if err != nil {
			t.Fatalf("csv field %s = %q: %v", v.Type().Field(i).Name, s, err)
		}
	}
	return r
}

// compareRows compares two slices of a row type field by field (times by
// the instant), in the order of their URL fingerprints (the export's order
// is the server's).
func compareRows(t *testing.T, want, got any) {
	t.Helper()
	wv, gv := sortedByFP(want), sortedByFP(got)
	if wv.Len() != gv.Len() {
		t.Fatalf("%d rows, want %d", gv.Len(), wv.Len())
	}
	for i := range wv.Len() {
		w, g := wv.Index(i), gv.Index(i)
		for j := range w.NumField() {
			name := w.Type().Field(j).Name
			wf, gf := w.Field(j).Interface(), g.Field(j).Interface()
			if wt, ok := wf.(time.Time); ok {
				if gt := gf.(time.Time); !wt.Equal(gt) {
					t.Errorf("row %d %s = %v, want %v", i, name, gt, wt)
				}
				continue
			}
			if !reflect.DeepEqual(wf, gf) {
				t.Errorf("row %d %s = %#v, want %#v", i, name, gf, wf)
			}
		}
	}
}

// TestRedeliveredRowsOnce inserts every row of every table twice, as a
// redelivery does (two parts, merges stopped so that they stay apart), and
// expects each exported once.
func TestRedeliveredRowsOnce(t *testing.T) {
	s := chtest.NewStore(t)
	for _, table := range chexport.Tables {
		if err := s.Conn().Exec(t.Context(), "SYSTEM STOP MERGES "+s.Database()+"."+string(table)); err != nil {
			t.Fatalf("stop merges: %v", err)
		}
	}
	f := insertFixture(t, s, "twice", 2)
	for _, table := range chexport.Tables {
		t.Run(string(table), func(t *testing.T) {
			var raw uint64
			if err := s.Conn().QueryRow(t.Context(), "SELECT count() FROM "+string(table)+" WHERE crawl_id = ?", f.crawl).Scan(&raw); err != nil {
				t.Fatal(err)
			}
			if raw != 2*fixtureRows {
				t.Fatalf("%s holds %d rows, want %d (each twice)", table, raw, 2*fixtureRows)
			}
			out := export(t, s, chexport.Request{CrawlID: f.crawl, Table: table, Format: chexport.JSONL})
			compareRows(t, f.want(table), readBack(t, table, chexport.JSONL, out))
		})
	}
}

// TestLatestDocumentVersion: a re-crawled document is exported in its
// latest version only.
func TestLatestDocumentVersion(t *testing.T) {
	s := chtest.NewStore(t)
	d := chstore.DocumentRow{CrawlID: "recrawl", URL: "http://a.test/", URLFP: 7, Host: "a.test", FetchedAt: base, Status: 200, Title: "old"}
	insert(t, s, chstore.Documents, d)
	d.FetchedAt, d.Title = base.Add(time.Hour), "new"
	insert(t, s, chstore.Documents, d)
	var buf bytes.Buffer
	if _, err := chexport.Export(t.Context(), s.Conn(), chexport.Request{CrawlID: "recrawl"}, &buf); err != nil {
		t.Fatal(err)
	}
	got := decode[chexport.DocumentRow](t, chexport.JSONL, buf.Bytes())
	if len(got) != 1 || got[0].Title != "new" || !got[0].FetchedAt.Equal(d.FetchedAt) {
		t.Errorf("got %+v, want only the version fetched at %v", got, d.FetchedAt)
	}
}

// TestColumnNames: the CSV header, the JSON keys and the Parquet columns
// of the files exported are the same names in the same order (documents
// without fields: their fields key is a column per field in CSV and
// Parquet, TestDocumentFields).
func TestColumnNames(t *testing.T) {
	s := chtest.NewStore(t)
	f := insertFixture(t, s, "names", 1)
	check := func(t *testing.T, table chexport.Table, jsonNames, columns []string) {
		out := export(t, s, chexport.Request{CrawlID: f.crawl, Table: table, Format: chexport.JSONL})
		line, _, _ := strings.Cut(string(out), "\n")
		if got := jsonKeys(t, line); !reflect.DeepEqual(got, jsonNames) {
			t.Errorf("json keys %q, want %q", got, jsonNames)
		}
		out = export(t, s, chexport.Request{CrawlID: f.crawl, Table: table, Format: chexport.CSV})
		header, _, _ := strings.Cut(string(out), "\r\n")
		if got := strings.Split(header, ","); !reflect.DeepEqual(got, columns) {
			t.Errorf("csv header %q, want %q", got, columns)
		}
		out = export(t, s, chexport.Request{CrawlID: f.crawl, Table: table, Format: chexport.Parquet})
		file, err := parquet.OpenFile(bytes.NewReader(out), int64(len(out)))
		if err != nil {
			t.Fatal(err)
		}
		var pq []string
		for _, f := range file.Schema().Fields() {
			pq = append(pq, f.Name())
		}
		if !reflect.DeepEqual(pq, columns) {
			t.Errorf("parquet columns %q, want %q", pq, columns)
		}
	}
	check(t, chexport.Documents, columnNames[chexport.DocumentRow](), csvColumns[chexport.DocumentRow]())
	check(t, chexport.FetchLog, columnNames[chexport.FetchLogRow](), columnNames[chexport.FetchLogRow]())
	check(t, chexport.Links, columnNames[chexport.LinkRow](), columnNames[chexport.LinkRow]())
	check(t, chexport.URLEvents, columnNames[chexport.URLEventRow](), columnNames[chexport.URLEventRow]())
}

// jsonKeys are the keys of a JSON object, in order.
func jsonKeys(t *testing.T, obj string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(obj))
	var keys []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q is not a JSON object: %v", obj, err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// TestParquetLogicalTypes: timestamps are TIMESTAMP(MILLIS, UTC), strings
// STRING, fingerprints and counts unsigned integers, final a boolean.
func TestParquetLogicalTypes(t *testing.T) {
	s := chtest.NewStore(t)
	f := insertFixture(t, s, "types", 1)
	out := export(t, s, chexport.Request{CrawlID: f.crawl, Table: chexport.FetchLog, Format: chexport.Parquet})
	file, err := parquet.OpenFile(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, field := range file.Schema().Fields() {
		types[field.Name()] = field.Type().String()
	}
	for col, want := range map[string]string{
		"fetched_at": "TIMESTAMP(isAdjustedToUTC=true,unit=MILLIS)",
		"url":        "STRING",
		"url_fp":     "INT(64,false)",
		"status":     "INT(16,false)",
		"final":      "BOOLEAN",
	} {
		if types[col] != want {
			t.Errorf("column %s: %s, want %s", col, types[col], want)
		}
	}
}

// TestExportErrors: every bad input is an error that says what is wrong,
// and nothing is written.
func TestExportErrors(t *testing.T) {
	s := chtest.NewStore(t)
	insert(t, s, chstore.FetchLog, chstore.FetchLogRow{CrawlID: "no-links", URL: "http://a.test/", URLFP: 1, Host: "a.test", FetchedAt: base})
	tests := []struct {
		name  string
		req   chexport.Request
		is    error
		parts []string
	}{
		{name: "unknown table", req: chexport.Request{CrawlID: "no-links", Table: "pages"}, is: chexport.ErrUnknownTable,
			parts: []string{`"pages"`, "documents, fetch_log, links, url_events"}},
		{name: "unknown format", req: chexport.Request{CrawlID: "no-links", Format: "xlsx"}, is: chexport.ErrUnknownFormat,
			parts: []string{`"xlsx"`, "jsonl, csv, parquet"}},
		{name: "unknown crawl", req: chexport.Request{CrawlID: "nope", Format: chexport.Parquet}, is: chexport.ErrNotFound,
			parts: []string{`crawl "nope" not found`}},
		{name: "crawl without the table's rows", req: chexport.Request{CrawlID: "no-links", Table: chexport.Links, Format: chexport.CSV},
			is: chexport.ErrNotFound, parts: []string{`crawl "no-links" has no rows in links`, "fetch_log", "--store-links"}},
		{name: "empty crawl id", req: chexport.Request{}, parts: []string{"crawl id must not be empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			n, err := chexport.Export(t.Context(), s.Conn(), tt.req, &buf)
			if err == nil {
				t.Fatalf("no error, %d rows", n)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			for _, p := range tt.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not say %q", err, p)
				}
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %d bytes before failing", buf.Len())
			}
		})
	}
}

func TestParseDefaults(t *testing.T) {
	if tb, err := chexport.ParseTable(""); err != nil || tb != chexport.Documents {
		t.Errorf(`ParseTable("") = %q, %v`, tb, err)
	}
	if f, err := chexport.ParseFormat(""); err != nil || f != chexport.JSONL {
		t.Errorf(`ParseFormat("") = %q, %v`, f, err)
	}
	if got := chexport.FileName("c1", chexport.FetchLog, chexport.Parquet); got != "c1-fetch_log.parquet" {
		t.Errorf("FileName = %q", got)
	}
}

// sortedByFP returns a sorted copy of a slice of rows, by the field URLFP
// (SourceFP for links): unique in the fixture.
func sortedByFP(rows any) reflect.Value {
	v := reflect.ValueOf(rows)
	c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
	reflect.Copy(c, v)
	key := "URLFP"
	if _, ok := c.Type().Elem().FieldByName(key); !ok {
		key = "SourceFP"
	}
	sort.Slice(c.Interface(), func(i, j int) bool {
		return c.Index(i).FieldByName(key).Uint() < c.Index(j).FieldByName(key).Uint()
	})
	return c
}

// TestCarriedDocuments: a re-crawl's documents export holds its own
// documents and those it carried over (documents_carried: unchanged since
// the crawl that fetched them), with the re-crawl's id and fingerprints
// and the earlier text, across batches of lookups and in every format; a
// page carried over and later fetched in full again is exported once, from
// the crawl's own documents, and a carried page in the latest version the
// earlier crawl stored; a carried page whose earlier document is gone
// (none was stored: not HTML) is left out.
func TestCarriedDocuments(t *testing.T) {
	s := chtest.NewStore(t)
	const carried = 130 // more than one lookup batch
	var (
		old     []chstore.DocumentRow
		carries []chstore.CarriedRow
	)
	for i := range carried {
		url := fmt.Sprintf("http://a.test/p%d", i)
		old = append(old, chstore.DocumentRow{CrawlID: "c0", URL: url, URLFP: uint64(1000 + i), Host: "a.test", FetchedAt: base,
			Status: 200, Title: fmt.Sprintf("t%d", i), Text: tricky[i%len(tricky)], ContentType: "text/html"})
		carries = append(carries, chstore.CarriedRow{CrawlID: "c1", URL: url, URLFP: uint64(5000 + i), Host: "a.test",
			FromCrawl: "c0", FromURLFP: uint64(1000 + i), CheckedAt: base.Add(time.Hour)})
	}
	carries = append(carries, chstore.CarriedRow{CrawlID: "c1", URL: "http://a.test/pdf", URLFP: 9999, Host: "a.test",
		FromCrawl: "c0", FromURLFP: 8888, CheckedAt: base.Add(time.Hour)}) // no document in c0
	insert(t, s, chstore.Documents, old...)
	// c0 fetched p1 twice: only its later text is carried
	insert(t, s, chstore.Documents, chstore.DocumentRow{CrawlID: "c0", URL: old[1].URL, URLFP: 1001, Host: "a.test",
		FetchedAt: base.Add(-time.Hour), Status: 200, Title: "t1 earlier", Text: "earlier", ContentType: "text/html"})
	insert(t, s, chstore.DocumentsCarried, carries...)
	// c1's own: a changed page, and p0 fetched in full again after its 304.
	insert(t, s, chstore.Documents,
		chstore.DocumentRow{CrawlID: "c1", URL: "http://a.test/new", URLFP: 7, Host: "a.test", FetchedAt: base.Add(time.Hour), Status: 200, Title: "new"},
		chstore.DocumentRow{CrawlID: "c1", URL: "http://a.test/p0", URLFP: 5000, Host: "a.test", FetchedAt: base.Add(2 * time.Hour), Status: 200, Title: "p0 again"})

	for _, f := range []chexport.Format{chexport.JSONL, chexport.CSV, chexport.Parquet} {
		t.Run(string(f), func(t *testing.T) {
			var buf bytes.Buffer
			n, err := chexport.Export(t.Context(), s.Conn(), chexport.Request{CrawlID: "c1", Format: f}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			got := decode[chexport.DocumentRow](t, f, buf.Bytes())
			if n != int64(len(got)) || len(got) != carried+1 {
				t.Fatalf("exported %d (read back %d) documents, want %d", n, len(got), carried+1)
			}
			byURL := make(map[string]chexport.DocumentRow)
			for _, d := range got {
				if _, dup := byURL[d.URL]; dup {
					t.Errorf("%s exported twice", d.URL)
				}
				byURL[d.URL] = d
			}
			if d := byURL["http://a.test/p0"]; d.Title != "p0 again" || d.CrawlID != "c1" {
				t.Errorf("p0 = %+v, want c1's own document", d)
			}
			for i := 1; i < carried; i++ {
				d, o := byURL[old[i].URL], old[i]
				if d.CrawlID != "c1" || d.URLFP != uint64(5000+i) || d.Title != o.Title || d.Text != o.Text || !d.FetchedAt.Equal(o.FetchedAt) {
					t.Errorf("%s = %+v, want c1's id and fingerprint %d with c0's title, text and fetch time", o.URL, d, 5000+i)
				}
			}
			if _, ok := byURL["http://a.test/pdf"]; ok {
				t.Errorf("a carried page without an earlier document was exported")
			}
		})
	}
}

// TestDocumentsStructuredData: in JSON lines a document's json_ld and
// microdata are JSON arrays and its opengraph a JSON object ([], [] and {}
// for none), not strings; in CSV they are the stored texts.
func TestDocumentsStructuredData(t *testing.T) {
	s := chtest.NewStore(t)
	ld := `[{"@type":"Product","name":"Kettle <b>","offers":{"price":"19.99"}}]`
	og := `{"og:title":"Kettle & co","og:type":"product"}`
	md := `[{"@type":"https://schema.org/Product","name":"Kettle","offers":{"price":"19.99"},"color":["red","blue"]}]`
	insert(t, s, chstore.Documents,
		chstore.DocumentRow{CrawlID: "sd", URL: "http://a.test/1", URLFP: 1, Host: "a.test", FetchedAt: base, Status: 200, JSONLD: ld, OpenGraph: og, Microdata: md},
		chstore.DocumentRow{CrawlID: "sd", URL: "http://a.test/2", URLFP: 2, Host: "a.test", FetchedAt: base, Status: 200})
	exportTwo := func(f chexport.Format) []byte {
		return exportRows(t, s, chexport.Request{CrawlID: "sd", Table: chexport.Documents, Format: f}, 2)
	}
	out := exportTwo(chexport.JSONL)
	got := make(map[string][3]string)
	for line := range strings.Lines(string(out)) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("json line %q: %v", line, err)
		}
		var url string
		if err := json.Unmarshal(m["url"], &url); err != nil {
			t.Fatal(err)
		}
		got[url] = [3]string{string(m["json_ld"]), string(m["opengraph"]), string(m["microdata"])}
	}
	want := map[string][3]string{"http://a.test/1": {ld, og, md}, "http://a.test/2": {"[]", "{}", "[]"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("json lines json_ld, opengraph, microdata: %q, want %q", got, want)
	}
	out = exportTwo(chexport.CSV)
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := make(map[string]int)
	for i, name := range recs[0] {
		col[name] = i
	}
	for _, rec := range recs[1:] {
		got := [3]string{rec[col["json_ld"]], rec[col["opengraph"]], rec[col["microdata"]]}
		if want := map[string][3]string{"http://a.test/1": {ld, og, md}, "http://a.test/2": {}}[rec[col["url"]]]; got != want {
			t.Errorf("csv %s: json_ld, opengraph, microdata %q, want %q", rec[col["url"]], got, want)
		}
	}
}

// TestDocumentsLanguageDetected: a document's detected language is
// exported next to the declared one, under language_detected, in JSON
// lines and CSV ("" when unknown); Parquet has the column too
// (TestColumnNames).
func TestDocumentsLanguageDetected(t *testing.T) {
	s := chtest.NewStore(t)
	insert(t, s, chstore.Documents,
		chstore.DocumentRow{CrawlID: "ld", URL: "http://a.test/1", URLFP: 1, Host: "a.test", FetchedAt: base, Status: 200, Language: "en", LanguageDetected: "de"},
		chstore.DocumentRow{CrawlID: "ld", URL: "http://a.test/2", URLFP: 2, Host: "a.test", FetchedAt: base, Status: 200, Language: "fr"})
	want := map[string][2]string{"http://a.test/1": {"en", "de"}, "http://a.test/2": {"fr", ""}}
	exportTwo := func(f chexport.Format) []byte {
		return exportRows(t, s, chexport.Request{CrawlID: "ld", Table: chexport.Documents, Format: f}, 2)
	}

	out := exportTwo(chexport.JSONL)
	got := make(map[string][2]string)
	for line := range strings.Lines(string(out)) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("json line %q: %v", line, err)
		}
		declared, _ := m["language"].(string)
		detected, ok := m["language_detected"].(string)
		if !ok {
			t.Errorf("json line without a language_detected string: %s", line)
		}
		got[m["url"].(string)] = [2]string{declared, detected}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("json lines language, language_detected: %q, want %q", got, want)
	}

	out = exportTwo(chexport.CSV)
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	langAt, detAt := slices.Index(recs[0], "language"), slices.Index(recs[0], "language_detected")
	if langAt < 0 || detAt < 0 {
		t.Fatalf("csv header %q: no language or language_detected", recs[0])
	}
	clear(got)
	for _, rec := range recs[1:] {
		got[rec[1]] = [2]string{rec[langAt], rec[detAt]}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("csv language, language_detected: %q, want %q", got, want)
	}
}
