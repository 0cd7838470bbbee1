package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// specFaces is what a crawl's spec (protobuf JSON, proto names) says of
// its extraction rules and documents.
type specFaces struct {
	Extract   *jobs.Extraction `json:"extract"`
	Documents *jobs.Documents  `json:"documents"`
}

// sameJSON reports whether a and b encode to the same JSON (a nil and an
// empty list of hosts are one request).
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func decodeSpec(t *testing.T, raw json.RawMessage) specFaces {
	t.Helper()
	var s specFaces
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("spec %s: %v", raw, err)
	}
	return s
}

// TestExtractAndDocuments: a crawl submitted with extraction rules and
// documents to keep has them in its spec, in the request's own JSON shape
// (hosts and types in lower case, the documents' short names expanded to
// media types), in the answer of POST, of GET and of every later revision
// (pause, resume); a crawl without them has neither.
func TestExtractAndDocuments(t *testing.T) {
	e := newEnv(t)
	body := `{"crawl_id":"shop","seeds":["http://127.0.0.2/"],
		"extract":{"rules":[
			{"name":"product","pattern":"/product/","hosts":["Shop.Example","127.0.0.2"],"fields":[
				{"name":"name","css":"h1"},
				{"name":"price","css":".price","type":"NUMBER"},
				{"name":"sku","css":"[itemprop=sku]","attr":"content"},
				{"name":"images","css":"img.gallery","attr":"src","type":"url","list":true},
				{"name":"body","xpath":"//div[@id='desc']","html":true},
				{"name":"published","xpath":"//time/@datetime","type":"date"}]},
			{"name":"any","fields":[{"name":"title","css":"title"}]}]},
		"documents":{"content_types":["pdf","application/vnd.oasis.opendocument.text"," DOCX "]}}`
	want := &jobs.Extraction{Rules: []jobs.ExtractRule{
		{Name: "product", Pattern: "/product/", Hosts: []string{"shop.example", "127.0.0.2"}, Fields: []jobs.ExtractField{
			{Name: "name", CSS: "h1"},
			{Name: "price", CSS: ".price", Type: "number"},
			{Name: "sku", CSS: "[itemprop=sku]", Attr: "content"},
			{Name: "images", CSS: "img.gallery", Attr: "src", Type: "url", List: true},
			{Name: "body", XPath: "//div[@id='desc']", HTML: true},
			{Name: "published", XPath: "//time/@datetime", Type: "date"}}},
		{Name: "any", Fields: []jobs.ExtractField{{Name: "title", CSS: "title"}}}}}
	wantTypes := []string{doctypes.PDF, doctypes.DOCX, doctypes.ODT}

	check := func(step string, raw json.RawMessage) {
		t.Helper()
		got := decodeSpec(t, raw)
		if !sameJSON(t, got.Extract, want) {
			t.Errorf("%s: extract = %+v, want %+v", step, got.Extract, want)
		}
		if got.Documents == nil || !slices.Equal(got.Documents.ContentTypes, wantTypes) {
			t.Errorf("%s: documents = %+v, want %v", step, got.Documents, wantTypes)
		}
		// The spec's rules are the request's: ExtractionRequest, the
		// converter the console shows them with, agrees.
		if got.Extract != nil {
			x, err := jobs.ExtractionSpec(got.Extract)
			if err != nil {
				t.Fatalf("%s: the spec's rules do not check: %v", step, err)
			}
			if back := jobs.ExtractionRequest(x); !sameJSON(t, back, want) {
				t.Errorf("%s: ExtractionRequest = %+v, want %+v", step, back, want)
			}
		}
	}
	var created crawljobs.CreateResponse
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", body, &created); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	check("POST", created.Spec)
	var v crawljobs.CrawlView
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls/shop", "", &v); code != http.StatusOK {
		t.Fatalf("get: %d %s", code, raw)
	}
	check("GET", v.Spec)
	for i, action := range []string{"pause", "resume"} {
		if code, raw := e.do(t, http.MethodPost, "/v1/crawls/shop/"+action, "", &v); code != http.StatusOK || v.Revision != uint64(i+2) {
			t.Fatalf("%s: %d %s", action, code, raw)
		}
		check(action, v.Spec)
	}
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls/shop", "", &v); code != http.StatusOK || v.Revision != 3 {
		t.Fatalf("get after resume: %d %s", code, raw)
	}
	check("GET after resume", v.Spec)

	// Without rules and documents the spec has neither; an empty list of
	// rules is no rule.
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", `{"crawl_id":"plain","seeds":["http://127.0.0.2/"],"extract":{"rules":[]},"documents":{"content_types":[]}}`, &created); code != http.StatusCreated {
		t.Fatalf("create plain: %d %s", code, raw)
	}
	if s := decodeSpec(t, created.Spec); s.Extract != nil || s.Documents != nil {
		t.Errorf("plain crawl: spec %s has extract or documents", created.Spec)
	}
}

// TestExtractRejects: a bad rule or document type is a 400 naming its
// field (extract, documents.content_types) with a message that names the
// rule, the field and the selector, and no crawl is made.
func TestExtractRejects(t *testing.T) {
	e := newEnv(t)
	rule := func(fields string) string {
		return `{"seeds":["http://127.0.0.2/"],"extract":{"rules":[{"name":"product","pattern":"/product/","fields":[{"name":"name","css":"h1"},` + fields + `]}]}}`
	}
	tests := []struct {
		name      string
		body      string
		wantField string
		wantMsg   []string // every one in the field's message
	}{
		{"broken css selector", rule(`{"name":"price","css":"div[class="}`), "extract", []string{`rule 1 ("product")`, `field 2 ("price")`, `css "div[class="`}},
		{"broken xpath", rule(`{"name":"price","xpath":"//div[@class="}`), "extract", []string{`field 2 ("price")`, `xpath "//div[@class="`}},
		{"css and xpath", rule(`{"name":"price","css":".p","xpath":"//p"}`), "extract", []string{`field 2 ("price")`, "css and xpath: give one of them"}},
		{"no selector", rule(`{"name":"price"}`), "extract", []string{`field 2 ("price")`, "no css nor xpath"}},
		{"unknown type", rule(`{"name":"price","css":".p","type":"money"}`), "extract", []string{`type "money": want string, number, date or url`}},
		{"html with attr", rule(`{"name":"price","css":".p","html":true,"attr":"title"}`), "extract", []string{"html and attr"}},
		{"field named twice", rule(`{"name":"name","css":"h2"}`), "extract", []string{`name "name" used twice`}},
		{"bad pattern", `{"seeds":["http://127.0.0.2/"],"extract":{"rules":[{"name":"p","pattern":"(","fields":[{"name":"a","css":"a"}]}]}}`,
			"extract", []string{`rule 1 ("p")`, "pattern"}},
		{"rule without fields", `{"seeds":["http://127.0.0.2/"],"extract":{"rules":[{"name":"p"}]}}`, "extract", []string{"no fields"}},
		{"unknown field key", rule(`{"name":"price","selector":".p"}`), "selector", nil},
		{"unknown document type", `{"seeds":["http://127.0.0.2/"],"documents":{"content_types":["pdf","image/png"]}}`,
			"documents.content_types", []string{`"image/png"`, "application/pdf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body errorBody
			code, raw := e.do(t, http.MethodPost, "/v1/crawls", tt.body, &body)
			if code != http.StatusBadRequest || len(body.Fields) != 1 || body.Fields[0].Field != tt.wantField {
				t.Fatalf("%d %s, want 400 with the one field %s", code, raw, tt.wantField)
			}
			for _, w := range tt.wantMsg {
				if !strings.Contains(body.Fields[0].Message, w) {
					t.Errorf("message %q lacks %q", body.Fields[0].Message, w)
				}
			}
		})
	}
	var list struct{ Crawls []crawljobs.CrawlView }
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls", "", &list); code != http.StatusOK || len(list.Crawls) != 0 {
		t.Errorf("refused requests made crawls: %d %s", code, raw)
	}
}
