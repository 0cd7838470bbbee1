package console_test

import (
	"context"
	"encoding/json"
	"html"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// shopRules are a crawl's extraction rules as the form and the API take
// them.
const shopRules = `{"rules": [
  {"name": "product", "pattern": "/product/", "fields": [
    {"name": "name", "css": "h1"},
    {"name": "price", "css": ".price", "type": "number"},
    {"name": "sku", "css": "[itemprop=sku]", "attr": "content"}]},
  {"name": "article", "hosts": ["127.0.0.2:8080"], "fields": [
    {"name": "title", "css": "h1"},
    {"name": "author", "xpath": "//span[@class='author']", "list": true}]}]}`

// TestFormExtraction: the form's extraction rules (the JSON of the API's
// extract) and documents (comma-separated short names or media types)
// reach the crawl's spec as the API takes them, and the crawl's page
// shows the rules; a broken selector, JSON that does not read, an
// unknown key and an unknown document type are errors on their fields,
// the text kept, no crawl made.
func TestFormExtraction(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	const id = "extract-form"
	r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {id}, "seeds_text": {"http://127.0.0.2:8080/"},
		"extract": {shopRules}, "documents.content_types": {" pdf, ,application/vnd.openxmlformats-officedocument.wordprocessingml.document "}})
	if r.code != http.StatusSeeOther {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	spec := e.jobs.Crawl(id)
	var want jobs.Extraction
	if err := json.Unmarshal([]byte(shopRules), &want); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(jobs.ExtractionRequest(spec.GetExtract()))
	wantJSON, _ := json.Marshal(want)
	if string(got) != string(wantJSON) {
		t.Errorf("rules from the form:\n%s\nwant\n%s", got, wantJSON)
	}
	if types := spec.GetDocuments().GetContentTypes(); !slices.Equal(types, []string{doctypes.PDF, doctypes.DOCX}) {
		t.Errorf("documents from the form: %v", types)
	}
	r = c.get("/ui/crawls/" + id)
	page := html.UnescapeString(r.body)
	for _, w := range []string{`id="rule-product"`, "Rule <code>product</code>: URLs matching <code>/product/</code>",
		"Rule <code>article</code>: every URL of 127.0.0.2:8080", "css <code>[itemprop=sku]</code>", "@content",
		"xpath <code>//span[@class='author']</code>", "text, every match", "text, number",
		`The crawl keeps <span id="kept-types">pdf, docx</span>`, "No document beyond HTML yet."} {
		if !strings.Contains(page, w) {
			t.Errorf("crawl page lacks %s", w)
		}
	}
	// The console edits no spec, but its pause and resume make new
	// revisions: they keep the rules and the documents.
	for _, action := range []string{"pause", "resume"} {
		path := "/ui/crawls/" + id + "/" + action
		if r := c.post(path, url.Values{"csrf": {c.csrf(path)}}); r.code != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", action, r.code, r.body)
		}
	}
	if now := e.jobs.Crawl(id); now.GetRevision() != 3 || !proto.Equal(now.GetExtract(), spec.GetExtract()) ||
		!proto.Equal(now.GetDocuments(), spec.GetDocuments()) {
		t.Errorf("after pause and resume: %v, want the rules and documents of %v", now, spec)
	}

	tests := []struct {
		name, field, value string
		want               []string // in the field's errors
	}{
		{"broken selector", "extract", strings.Replace(shopRules, `"css": ".price"`, `"css": "div[class="`, 1),
			[]string{`rule 1 ("product"): field 2 ("price"): css "div[class="`}},
		{"unreadable JSON", "extract", `{"rules": [`, []string{`want a JSON object {"rules": [`}},
		{"unknown key", "extract", `{"rules": [{"name": "p", "fields": [{"name": "a", "selector": "h1"}]}]}`, []string{`unknown field "selector"`}},
		{"text after the object", "extract", `{"rules": []} {}`, []string{"text follows it"}},
		{"unknown document type", "documents.content_types", "pdf, image/png", []string{`content type "image/png"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "seeds_text": {"http://127.0.0.2:8080/"}, tt.field: {tt.value}})
			if r.code != http.StatusBadRequest {
				t.Fatalf("submit: %d, want 400", r.code)
			}
			var shown []string
			for _, m := range fieldErrorRE.FindAllStringSubmatch(r.body, -1) {
				if m[1] == tt.field {
					shown = append(shown, html.UnescapeString(m[2]))
				}
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(shown, func(m string) bool { return strings.Contains(m, w) }) {
					t.Errorf("%s: %q not shown (shown: %q)", tt.field, w, shown)
				}
			}
			// The text is kept as typed.
			if !strings.Contains(html.UnescapeString(r.body), tt.value) {
				t.Errorf("the form lost the value of %s", tt.field)
			}
		})
	}
	c.t = t
	if n := len(e.jobs.Crawls()); n != 1 {
		t.Errorf("%d crawls, want only the first", n)
	}
}

// writeRows inserts rows through chstore's batch writer, as the services
// do, and stops it.
func writeRows[T any](t *testing.T, store *chstore.Store, table chstore.Table[T], rows ...T) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	w := chstore.NewBatchWriter(store, table, chstore.BatchOptions{FlushInterval: 10 * time.Millisecond}, zap.NewNop(), nil)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	err := w.Write(ctx, rows...)
	cancel()
	if runErr := <-done; err == nil {
		err = runErr
	}
	if err != nil {
		t.Fatalf("write %s: %v", table.Name, err)
	}
}

// TestExtractionCounts: the crawl's page counts, per extraction rule, the
// pages it matched and, per field, how many of them it missed, a
// redelivered page once; a field missed on every page its rule matched is
// marked broken; the pages no rule matched and a rule the pages name that
// the spec no longer has are shown. The documents beyond HTML are counted
// by content type with their parse errors, and the parse errors by kind,
// another crawl's rows left out.
func TestExtractionCounts(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	csrf := c.login()
	const id = "extract-counts"
	if r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {id}, "seeds_text": {"http://127.0.0.2:8080/"},
		"extract": {shopRules}, "documents.content_types": {"pdf, office"}}); r.code != http.StatusSeeOther {
		t.Fatalf("submit: %d %s", r.code, r.body)
	}
	const host = "127.0.0.2:8080"
	now := time.Now().UTC().Truncate(time.Second)
	var (
		metas []chstore.DocumentMetaRow
		docs  []chstore.DocumentRow
	)
	// page adds a page of crawl crawlID: its document_meta row (the rule
	// applied, the fields missed, the parse error) and, with a content
	// type, its documents row.
	page := func(crawlID, path string, age time.Duration, rule string, missing []string, contentType, parseError string) {
		u := "http://" + host + path
		fp := fingerprint.URL(crawlID, u)
		metas = append(metas, chstore.DocumentMetaRow{CrawlID: crawlID, URL: u, URLFP: fp, Host: host, FetchedAt: now.Add(-age),
			ExtractRule: rule, ExtractMissing: missing, ParseError: parseError})
		if contentType != "" {
			docs = append(docs, chstore.DocumentRow{CrawlID: crawlID, URL: u, URLFP: fp, Host: host, FetchedAt: now.Add(-age),
				Status: 200, ContentType: contentType})
		}
	}
	// Product pages: sku missed on all 4 (a broken selector), price on 1,
	// name on none; /product/2 redelivered (its rows count once).
	page(id, "/product/1", 0, "product", []string{"sku"}, "text/html", "")
	page(id, "/product/2", 0, "product", []string{"sku"}, "text/html", "")
	page(id, "/product/2", 0, "product", []string{"sku"}, "text/html", "")
	page(id, "/product/3", 0, "product", []string{"price", "sku"}, "text/html", "")
	page(id, "/product/4", 0, "product", []string{"sku"}, "text/html", "")
	// Articles: author missed on 1 of 2.
	page(id, "/a/1", 0, "article", nil, "text/html", "")
	page(id, "/a/2", 0, "article", []string{"author"}, "text/html", "")
	// A rule of an earlier revision of the rules.
	page(id, "/old", 0, "old", []string{"gone"}, "text/html", "")
	// No rule: a page, and the documents beyond HTML (one PDF twice, in
	// two versions; one PDF encrypted, a docx truncated, a PDF that timed
	// out before it became a document).
	page(id, "/about", 0, "", nil, "text/html", "")
	page(id, "/d/1.pdf", time.Hour, "", nil, doctypes.PDF, "")
	page(id, "/d/1.pdf", 0, "", nil, doctypes.PDF, "")
	page(id, "/d/2.pdf", 0, "", nil, doctypes.PDF, "encrypted")
	page(id, "/d/3.docx", 0, "", nil, doctypes.DOCX, "truncated")
	page(id, "/d/4.xlsx", 0, "", nil, doctypes.XLSX, "")
	page(id, "/d/5.pdf", 0, "", nil, "", "timeout")
	// Another crawl's rows count nowhere.
	page("other", "/product/1", 0, "product", []string{"name", "price", "sku"}, "text/html", "")
	page("other", "/d/1.pdf", 0, "", nil, doctypes.PDF, "encrypted")
	// What the rule took of /product/3, what the PDF says of itself.
	for i := range docs {
		switch docs[i].URL {
		case "http://" + host + "/product/3":
			docs[i].Fields = `{"name":"Kettle <b>2 l</b>"}`
		case "http://" + host + "/d/1.pdf":
			docs[i].Properties = `{"author":"A. Writer","pages":12}`
		}
	}
	writeRows(t, e.store, chstore.DocumentMeta, metas...)
	writeRows(t, e.store, chstore.Documents, docs...)

	r := c.get("/ui/crawls/" + id)
	if r.code != http.StatusOK {
		t.Fatalf("crawl page: %d %s", r.code, r.body)
	}
	body := html.UnescapeString(r.body)
	rules := map[string]string{} // rule: its pages matched
	for _, m := range regexp.MustCompile(`(?s)<table class="rule" id="rule-([^"]+)"><caption>(.*?)</caption>`).FindAllStringSubmatch(body, -1) {
		pages := regexp.MustCompile(`<span class="x-pages">(\d+)</span>`).FindStringSubmatch(m[2])
		if pages == nil {
			t.Fatalf("rule %s: no page count in %q", m[1], m[2])
		}
		rules[m[1]] = pages[1]
		if strings.Contains(m[2], "no longer in the crawl's rules") != (m[1] == "old") {
			t.Errorf("rule %s: caption %q", m[1], m[2])
		}
	}
	if want := map[string]string{"product": "4", "article": "2", "old": "1"}; !maps.Equal(rules, want) {
		t.Errorf("pages matched per rule: %v, want %v", rules, want)
	}
	type fieldShown struct{ class, missing string }
	fields := map[string]fieldShown{}
	broken := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?s)<tr id="rule-([^"]+)"(?: class="(\w+)")?>(.*?)</tr>`).FindAllStringSubmatch(body, -1) {
		missing := regexp.MustCompile(`<span class="x-missing">(\d+)</span>`).FindStringSubmatch(m[3])
		if missing == nil {
			t.Fatalf("field %s: no count in %q", m[1], m[3])
		}
		fields[m[1]] = fieldShown{m[2], missing[1]}
		broken[m[1]] = strings.Contains(m[3], `class="x-broken"`)
	}
	wantFields := map[string]fieldShown{
		"product-name": {"", "0"}, "product-price": {"warn", "1"}, "product-sku": {"bad", "4"},
		"article-title": {"", "0"}, "article-author": {"warn", "1"},
		"old-gone": {"bad", "1"},
	}
	if !maps.Equal(fields, wantFields) {
		t.Errorf("fields shown (class, missed on): %v, want %v", fields, wantFields)
	}
	for f, b := range broken {
		if want := wantFields[f].class == "bad"; b != want {
			t.Errorf("field %s marked broken: %v, want %v", f, b, want)
		}
	}
	if !strings.Contains(body, `<span class="x-missing">4</span> of 4 pages (100%) <strong class="x-broken">`) {
		t.Error("the broken sku field does not read 4 of 4 pages (100%)")
	}
	if m := regexp.MustCompile(`<span id="x-norule">(\d+)</span>`).FindStringSubmatch(body); m == nil || m[1] != "6" {
		t.Errorf("pages no rule matched: %v, want 6", m)
	}

	types := map[string][2]string{}
	for _, m := range regexp.MustCompile(`<tr(?: class="warn")?><td>([^<]+)</td><td class="n x-docs">(\d+)</td><td class="n x-failed">(\d+)</td></tr>`).FindAllStringSubmatch(body, -1) {
		types[m[1]] = [2]string{m[2], m[3]}
	}
	wantTypes := map[string][2]string{
		"pdf (" + doctypes.PDF + ")": {"2", "1"}, "docx (" + doctypes.DOCX + ")": {"1", "1"}, "xlsx (" + doctypes.XLSX + ")": {"1", "0"},
	}
	if !maps.Equal(types, wantTypes) {
		t.Errorf("documents by type (documents, parse errors): %v, want %v", types, wantTypes)
	}
	kinds := map[string]string{}
	if m := regexp.MustCompile(`(?s)<table id="parse-errors">(.*?)</table>`).FindStringSubmatch(body); m != nil {
		for _, k := range regexp.MustCompile(`<tr><td>([^<]+)</td><td class="n">(\d+)</td></tr>`).FindAllStringSubmatch(m[1], -1) {
			kinds[k[1]] = k[2]
		}
	}
	if want := map[string]string{"encrypted": "1", "truncated": "1", "timeout": "1"}; !maps.Equal(kinds, want) {
		t.Errorf("parse errors by kind: %v, want %v", kinds, want)
	}
	if !strings.Contains(body, `The crawl keeps <span id="kept-types">pdf, docx, xlsx, pptx, odt, ods, odp</span>`) {
		t.Error("the crawl page lacks the types the crawl keeps")
	}

	// Each missed field links to the story of a page it missed, which
	// shows the rule applied, the fields missed and those taken.
	m := regexp.MustCompile(`<tr id="rule-product-price" class="warn">.*?<a class="x-example" href="([^"]+)">`).FindStringSubmatch(r.body)
	if m == nil || !strings.HasSuffix(html.UnescapeString(m[1]), url.QueryEscape("http://"+host+"/product/3")) {
		t.Fatalf("price row: link %v, want the story of /product/3", m)
	}
	r = c.get(html.UnescapeString(m[1]))
	story := html.UnescapeString(r.body)
	for _, w := range []string{`<dd id="doc-rule"><code>product</code>; selected nothing: <span id="doc-missing">price, sku</span></dd>`,
		"<pre class=\"text\" id=\"doc-fields\">{\n  \"name\": \"Kettle <b>2 l</b>\"\n}</pre>"} {
		if !strings.Contains(story, w) {
			t.Errorf("story of /product/3 lacks %s", w)
		}
	}
	if strings.Contains(r.body, "<b>2 l</b>") {
		t.Error("story of /product/3: a field's HTML is not escaped")
	}
	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape("http://"+host+"/d/1.pdf"))
	if story := html.UnescapeString(r.body); !strings.Contains(story, `"author": "A. Writer",`) || strings.Contains(story, `id="doc-rule"`) {
		t.Errorf("story of the PDF: %d, lacks its properties or shows a rule", r.code)
	}
	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape("http://"+host+"/d/2.pdf"))
	if !strings.Contains(r.body, `<dd id="doc-parse-error">encrypted</dd>`) {
		t.Errorf("story of the encrypted PDF: %d, lacks its parse error", r.code)
	}
	r = c.get("/ui/crawls/" + id + "/url?u=" + url.QueryEscape("http://"+host+"/d/5.pdf"))
	if !strings.Contains(r.body, `<p id="not-read">No document: the parser could not read the body (timeout).</p>`) {
		t.Errorf("story of the PDF that timed out: %d, lacks why it has no document", r.code)
	}

	// A crawl without rules or documents shows neither section.
	if r := c.post("/ui/crawls", url.Values{"csrf": {csrf}, "crawl_id": {"plain"}, "seeds_text": {"http://127.0.0.2:8080/"}}); r.code != http.StatusSeeOther {
		t.Fatalf("submit plain: %d", r.code)
	}
	if r := c.get("/ui/crawls/plain"); r.code != http.StatusOK || strings.Contains(r.body, `id="extraction"`) || strings.Contains(r.body, `id="doctypes"`) {
		t.Errorf("plain crawl's page: %d, shows extraction or documents beyond HTML", r.code)
	}
}
