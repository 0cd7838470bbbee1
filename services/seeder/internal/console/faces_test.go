package console

import (
	"encoding/json"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// A crawl spec has four faces: the protobuf CrawlSpec the services read,
// the API's JSON request (jobs.Request), its OpenAPI schema and the
// console's form. TestSpecFaces ties them: every field of the protobuf is
// in the other three (but those the server sets itself), every field of
// the JSON request and of the form is in the protobuf or named here as
// request-only, and every form field changes the request it makes.

// serverSet are the CrawlSpec fields a request does not give: the
// server's record of the crawl, or derived from the seeds.
var serverSet = map[string]string{
	"state":              "set by pause, resume and cancel",
	"updated_at":         "the server's clock",
	"revision":           "the server's count of changes",
	"created_at":         "the server's clock",
	"deleted_at":         "set by DELETE",
	"scope.seed_hosts":   "derived from the seeds (scope mode)",
	"scope.seed_domains": "derived from the seeds (scope mode)",
}

// requestOnly are the fields of the request that are not the crawl's spec:
// its seeds and how to make them.
var requestOnly = []string{"seeds", "seeds_text", "skip_invalid_seeds", "keywords", "sitemaps", "sitemap_urls"}

// notInForm are spec fields the form leaves to the API, with why.
var notInForm = map[string]string{
	"scope.sites.hosts":          "the form takes scope.sites as one JSON field",
	"scope.sites.domains":        "the form takes scope.sites as one JSON field",
	"scope.sites.allow_patterns": "the form takes scope.sites as one JSON field",
	"scope.sites.deny_patterns":  "the form takes scope.sites as one JSON field",
}

// protoPaths returns the field paths of m ("scope.sites.hosts"); the
// fields of Header are one value each in the JSON ("Name: value"), and
// durations and timestamps are leaves.
func protoPaths(m protoreflect.MessageDescriptor, prefix string) []string {
	var out []string
	fields := m.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		p := prefix + string(f.Name())
		out = append(out, p)
		if f.Kind() == protoreflect.MessageKind {
			switch name := string(f.Message().FullName()); {
			case name == "google.protobuf.Duration", name == "google.protobuf.Timestamp", strings.HasSuffix(name, ".Header"):
				continue
			}
			out = append(out, protoPaths(f.Message(), p+".")...)
		}
	}
	return out
}

// jsonPaths returns the JSON field paths of t, recursing into structs,
// pointers and slices of structs.
func jsonPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || !strings.HasPrefix(t.PkgPath(), "github.com/trawl-crawler/trawl/services/seeder/") {
		return nil
	}
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, prefix+name)
		out = append(out, jsonPaths(f.Type, prefix+name+".")...)
	}
	return out
}

// openAPIPaths returns the property paths of the OpenAPI schema s,
// following $refs into components/schemas.
func openAPIPaths(t *testing.T, schemas map[string]any, s map[string]any, prefix string) []string {
	t.Helper()
	if ref, ok := s["$ref"].(string); ok {
		s, _ = schemas[strings.TrimPrefix(ref, "#/components/schemas/")].(map[string]any)
	}
	if items, ok := s["items"].(map[string]any); ok {
		return openAPIPaths(t, schemas, items, prefix)
	}
	props, _ := s["properties"].(map[string]any)
	var out []string
	for name, p := range props {
		out = append(out, prefix+name)
		out = append(out, openAPIPaths(t, schemas, p.(map[string]any), prefix+name+".")...)
	}
	return out
}

var formFieldRE = regexp.MustCompile(`fld \$d "([a-z_.]+)"|name="([a-z_.]+)"`)

// templateFields returns the names of the new-crawl form's fields, and which
// are checkboxes.
func templateFields(t *testing.T) (names []string, checkbox map[string]bool) {
	t.Helper()
	b, err := os.ReadFile("templates/new.html")
	if err != nil {
		t.Fatal(err)
	}
	checkbox = map[string]bool{}
	for line := range strings.Lines(string(b)) {
		for _, m := range formFieldRE.FindAllStringSubmatch(line, -1) {
			name := m[1] + m[2]
			if name == "csrf" {
				continue
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
			if strings.Contains(line, `"checkbox"`) || strings.Contains(line, `type="checkbox"`) {
				checkbox[name] = true
			}
		}
	}
	slices.Sort(names)
	return names, checkbox
}

// under reports whether path is name or a field below it.
func under(path, name string) bool { return path == name || strings.HasPrefix(path, name+".") }

func TestSpecFaces(t *testing.T) {
	proto := protoPaths((&crawlv1.CrawlSpec{}).ProtoReflect().Descriptor(), "")
	jsonReq := jsonPaths(reflect.TypeFor[jobs.Request](), "")
	var doc map[string]any
	b, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	openAPI := openAPIPaths(t, schemas, schemas["CrawlRequest"].(map[string]any), "")
	form, checkbox := templateFields(t)

	requestOnlyPath := func(p string) bool {
		return slices.ContainsFunc(requestOnly, func(r string) bool { return under(p, r) })
	}
	// Every spec field a request gives is in the JSON, the OpenAPI
	// schema and the form (the form through the field itself or the
	// JSON field holding it).
	for _, p := range proto {
		if _, ok := serverSet[p]; ok {
			continue
		}
		if !slices.Contains(jsonReq, p) {
			t.Errorf("CrawlSpec.%s has no field in the API's JSON request (jobs.Request)", p)
		}
		if !slices.Contains(openAPI, p) {
			t.Errorf("CrawlSpec.%s is not in the OpenAPI schema CrawlRequest", p)
		}
		if _, ok := notInForm[p]; !ok && !slices.ContainsFunc(form, func(f string) bool { return under(p, f) || under(f, p) }) {
			t.Errorf("CrawlSpec.%s has no field in the console's form", p)
		}
	}
	// Every field of the JSON request and of the OpenAPI schema is the
	// spec's or one of the request's own.
	for face, paths := range map[string][]string{"JSON request": jsonReq, "OpenAPI schema": openAPI} {
		for _, p := range paths {
			if !slices.Contains(proto, p) && !requestOnlyPath(p) {
				t.Errorf("%s field %s is neither in CrawlSpec nor a request-only field", face, p)
			}
		}
	}
	jsonSorted, openAPISorted := slices.Sorted(slices.Values(jsonReq)), slices.Sorted(slices.Values(openAPI))
	if !slices.Equal(jsonSorted, openAPISorted) {
		t.Errorf("the JSON request and the OpenAPI schema differ:\nJSON    %v\nOpenAPI %v", jsonSorted, openAPISorted)
	}
	// Every form field is read: set alone (with revisit.enabled for the
	// revisit fields, keywords for the keywords' settings), it changes
	// the request the form makes.
	if len(form) < 20 {
		t.Fatalf("only %d form fields found: %v", len(form), form)
	}
	for _, f := range form {
		if !slices.Contains(jsonReq, f) && !requestOnlyPath(f) {
			t.Errorf("form field %s is not a field of the API's request", f)
		}
		v, b := url.Values{}, url.Values{}
		if strings.HasPrefix(f, "revisit.") && f != "revisit.enabled" {
			v.Set("revisit.enabled", "on")
			b.Set("revisit.enabled", "on")
		}
		if strings.HasPrefix(f, "keywords.") && f != "keywords.terms" {
			v.Set("keywords.terms", "crawler")
			b.Set("keywords.terms", "crawler")
		}
		v.Set(f, sampleValue(f, checkbox[f]))
		got, _ := requestFromForm(v)
		want, _ := requestFromForm(b)
		if reflect.DeepEqual(got, want) {
			t.Errorf("form field %s = %q changes nothing in the request: the API ignores it", f, v.Get(f))
		}
	}
}

// sampleValue is a value of form field f that a form reads.
func sampleValue(f string, checkbox bool) string {
	switch {
	case checkbox && f == "keywords.engines":
		return "bing"
	case checkbox:
		return "on"
	case f == "scope.sites":
		return `[{"hosts": ["example.org"]}]`
	case f == "keywords.templates":
		return "mine https://search.example/?q={query}"
	case f == "priority.rules":
		return "/product/=+50"
	case f == "extract":
		return `{"rules": [{"name": "product", "fields": [{"name": "name", "css": "h1"}]}]}`
	case f == "documents.content_types":
		return "pdf, office"
	case f == "render.mode":
		return "auto"
	case f == "render.sites":
		return "app.example,shop.example always"
	}
	return "7"
}
