package api_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

// answer is a response, its body read and closed.
type answer struct {
	StatusCode int
	Header     http.Header
}

// get sends an authorized GET and returns the answer and its body.
func (e env) get(t *testing.T, path string) (answer, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", path, err)
	}
	return answer{StatusCode: resp.StatusCode, Header: resp.Header}, body
}

// TestExport: GET /v1/crawls/{id}/export streams a table in a format with
// its media type and file name; a redelivered row comes once; bad tables
// and formats are 400s naming the allowed values; an unknown crawl, or a
// crawl without rows in the table, is a 404.
func TestExport(t *testing.T) {
	e := newEnv(t)
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", `{"crawl_id":"exp","seeds":["http://127.0.0.2/"]}`, nil); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	now := time.Now().UTC().Truncate(time.Second)
	fetch := []chstore.FetchLogRow{
		{CrawlID: "exp", URLFP: 1, URL: "http://127.0.0.2/", Host: "127.0.0.2", Status: 200, FetchedAt: now, FetchedAtMs: 5, Final: true},
		{CrawlID: "exp", URLFP: 2, URL: "http://127.0.0.2/b", Host: "127.0.0.2", ErrorKind: "timeout", ErrorMessage: "read: i/o timeout, twice", FetchedAt: now, Final: true},
	}
	insert(t, t.Context(), e.store, chstore.FetchLog, fetch)
	insert(t, t.Context(), e.store, chstore.FetchLog, fetch) // redelivered
	insert(t, t.Context(), e.store, chstore.Documents, []chstore.DocumentRow{
		{CrawlID: "exp", URLFP: 1, URL: "http://127.0.0.2/", Host: "127.0.0.2", Status: 200, Title: "Home", Text: "hello\nworld", FetchedAt: now},
	})

	tests := []struct {
		name, query, contentType, file string
		check                          func(t *testing.T, body []byte)
	}{
		{
			name: "defaults: documents as json lines", query: "", contentType: "application/x-ndjson", file: "exp-documents.jsonl",
			check: func(t *testing.T, body []byte) {
				var d chexport.DocumentRow
				if err := json.Unmarshal(bytes.TrimSpace(body), &d); err != nil || d.Title != "Home" || d.Text != "hello\nworld" {
					t.Errorf("body %q (%v)", body, err)
				}
			},
		},
		{
			name: "fetch_log as csv", query: "?table=fetch_log&format=csv", contentType: "text/csv; charset=utf-8; header=present", file: "exp-fetch_log.csv",
			check: func(t *testing.T, body []byte) {
				recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
				if err != nil || len(recs) != 3 || recs[0][0] != "crawl_id" {
					t.Fatalf("csv %q (%v): want a header and 2 rows, each once", body, err)
				}
				if !strings.Contains(string(body), `"read: i/o timeout, twice"`) {
					t.Errorf("csv %q: the message with a comma is not quoted", body)
				}
			},
		},
		{
			name: "fetch_log as parquet", query: "?table=fetch_log&format=parquet", contentType: "application/vnd.apache.parquet", file: "exp-fetch_log.parquet",
			check: func(t *testing.T, body []byte) {
				rows, err := parquet.Read[chexport.FetchLogRow](bytes.NewReader(body), int64(len(body)))
				if err != nil || len(rows) != 2 {
					t.Fatalf("parquet: %d rows (%v), want 2", len(rows), err)
				}
				for _, r := range rows {
					if r.URLFP == 1 && !r.FetchedAt.Equal(now.Add(5*time.Millisecond)) {
						t.Errorf("fetched_at %v, want %v", r.FetchedAt, now.Add(5*time.Millisecond))
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, "/v1/crawls/exp/export"+tt.query)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.contentType {
				t.Errorf("Content-Type %q, want %q", ct, tt.contentType)
			}
			if cd, want := resp.Header.Get("Content-Disposition"), `attachment; filename=`+tt.file; cd != want {
				t.Errorf("Content-Disposition %q, want %q", cd, want)
			}
			tt.check(t, body)
		})
	}

	errs := []struct {
		name, path string
		code       int
		says       []string
		field      string
	}{
		{"unknown table", "/v1/crawls/exp/export?table=pages", http.StatusBadRequest, []string{`unknown table "pages"`, "documents, fetch_log, links, url_events"}, "table"},
		{"unknown format", "/v1/crawls/exp/export?format=xlsx", http.StatusBadRequest, []string{`unknown format "xlsx"`, "jsonl, csv, parquet"}, "format"},
		{"unknown crawl", "/v1/crawls/nope/export", http.StatusNotFound, []string{`no crawl "nope"`}, ""},
		{"no rows in the table", "/v1/crawls/exp/export?table=links&format=parquet", http.StatusNotFound, []string{`crawl "exp" has no rows in links`, "--store-links"}, ""},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.get(t, tt.path)
			var eb struct {
				Error  string `json:"error"`
				Fields []struct {
					Field string `json:"field"`
				} `json:"fields"`
			}
			if err := json.Unmarshal(body, &eb); err != nil {
				t.Fatalf("status %d, body %q: %v", resp.StatusCode, body, err)
			}
			if resp.StatusCode != tt.code || resp.Header.Get("Content-Disposition") != "" {
				t.Errorf("status %d, Content-Disposition %q; want %d and none", resp.StatusCode, resp.Header.Get("Content-Disposition"), tt.code)
			}
			for _, s := range tt.says {
				if !strings.Contains(eb.Error, s) {
					t.Errorf("error %q does not say %q", eb.Error, s)
				}
			}
			if tt.field != "" && (len(eb.Fields) != 1 || eb.Fields[0].Field != tt.field) {
				t.Errorf("fields %+v, want one for %s", eb.Fields, tt.field)
			}
		})
	}

	counted := requestCounts(t, e.reg)
	if counted["GET /v1/crawls/{id}/export 200"] != 3 || counted["GET /v1/crawls/{id}/export 404"] != 2 || counted["GET /v1/crawls/{id}/export 400"] != 2 {
		t.Errorf("api_requests_total = %v", counted)
	}
}
