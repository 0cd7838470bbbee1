package api_test

import (
	"encoding/json"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// TestIdentityAndTimeLimit: a crawl submitted with a user agent, extra
// headers and a time limit has them in its spec; once the limit has
// passed the API shows it cancelled by its time limit, refuses to resume
// it and takes a cancel as done.
func TestIdentityAndTimeLimit(t *testing.T) {
	e := newEnv(t)
	body := `{"crawl_id":"timed","seeds":["http://127.0.0.2/"],
		"identity":{"user_agent":"examplebot/1.0 (+https://example.org/bot)","headers":["accept-language: en","From: ops@example.org"]},
		"limits":{"max_duration":"1s"}}`
	var created crawljobs.CreateResponse
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls", body, &created); code != http.StatusCreated {
		t.Fatalf("create: %d %s", code, raw)
	}
	if created.State != "running" || created.StateReason != "" {
		t.Errorf("created = %+v, want running", created.CrawlView)
	}
	var spec struct {
		Identity struct {
			UserAgent string `json:"user_agent"`
			Headers   []struct{ Name, Value string }
		}
		Limits struct {
			MaxDuration string `json:"max_duration"`
		}
	}
	if err := json.Unmarshal(created.Spec, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Identity.UserAgent != "examplebot/1.0 (+https://example.org/bot)" || len(spec.Identity.Headers) != 2 ||
		spec.Identity.Headers[0].Name != "Accept-Language" || spec.Identity.Headers[1].Value != "ops@example.org" ||
		spec.Limits.MaxDuration != "1s" {
		t.Errorf("spec = %s", created.Spec)
	}

	deadline := created.CreatedAt.Add(time.Second)
	e.clock.Add(time.Second)
	var v crawljobs.CrawlView
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls/timed", "", &v); code != http.StatusOK {
		t.Fatalf("get: %d %s", code, raw)
	}
	if v.State != "cancelled" || v.Status != "cancelled" || v.StateReason != crawljobs.ReasonTimeLimit ||
		!v.UpdatedAt.Equal(deadline) || v.Revision != 1 {
		t.Errorf("after the time limit: %+v, want cancelled by its time limit at %v, revision 1", v, deadline)
	}
	code, raw := e.do(t, http.MethodPost, "/v1/crawls/timed/resume", "", nil)
	if code != http.StatusConflict || !strings.Contains(string(raw), "time limit") {
		t.Errorf("resume: %d %s, want 409 naming the time limit", code, raw)
	}
	if code, raw := e.do(t, http.MethodPost, "/v1/crawls/timed/cancel", "", &v); code != http.StatusOK || v.State != "cancelled" {
		t.Errorf("cancel: %d %s, want 200 and cancelled", code, raw)
	}
	var list struct{ Crawls []crawljobs.CrawlView }
	if code, raw := e.do(t, http.MethodGet, "/v1/crawls", "", &list); code != http.StatusOK || len(list.Crawls) != 1 ||
		list.Crawls[0].State != "cancelled" || list.Crawls[0].StateReason != crawljobs.ReasonTimeLimit {
		t.Errorf("list: %d %s", code, raw)
	}

	code, raw = e.do(t, http.MethodPost, "/v1/crawls", `{"seeds":["http://127.0.0.2/"],
		"identity":{"user_agent":"nobody","headers":["Cookie: a=b","X Bad: 1"]},"limits":{"max_duration":"-1h"}}`, nil)
	for _, want := range []string{`"identity.user_agent"`, "no contact", `"identity.headers[0]"`, "header Cookie may not be set",
		`"identity.headers[1]"`, "want a token", `"limits.max_duration"`, "want a positive duration"} {
		if code != http.StatusBadRequest || !strings.Contains(string(raw), want) {
			t.Errorf("bad identity and limit: %d %s, want 400 with %s", code, raw, want)
		}
	}
}

// TestOpenAPIRequestFields: every JSON field of a crawl request (jobs.Request
// and the structs it holds) is a property of the OpenAPI document's
// CrawlRequest schema, at the same place.
func TestOpenAPIRequestFields(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	checkSchema(t, doc.Components.Schemas, "CrawlRequest", doc.Components.Schemas["CrawlRequest"], reflect.TypeFor[jobs.Request]())
}

type schema struct {
	Ref        string            `json:"$ref"`
	Type       any               `json:"type"`
	Properties map[string]schema `json:"properties"`
	Items      *schema           `json:"items"`
}

// checkSchema checks that s (at path) has a property for every JSON field
// of the struct type typ, recursively.
func checkSchema(t *testing.T, all map[string]schema, path string, s schema, typ reflect.Type) {
	t.Helper()
	for s.Ref != "" {
		s = all[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		if typ.Kind() == reflect.Slice && s.Items != nil {
			s = *s.Items
			for s.Ref != "" {
				s = all[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
			}
		}
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct {
		return
	}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		p, ok := s.Properties[name]
		if !ok {
			t.Errorf("openapi.json: %s has no property %s (%s.%s)", path, name, typ.Name(), f.Name)
			continue
		}
		checkSchema(t, all, path+"."+name, p, f.Type)
	}
}
