package jobs_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		want       jobs.Request
		wantFields []string // FieldErrors naming these fields
		wantMsg    string   // else an error containing this
	}{
		{name: "full", body: `{"crawl_id":"c","seeds":["http://127.0.0.2/"],"scope":{"same_host_only":true,"deny_patterns":["x"]},"limits":{"max_pages_per_host":5}}`,
			want: jobs.Request{CrawlID: "c", Seeds: []string{"http://127.0.0.2/"},
				Scope: &jobs.Scope{SameHostOnly: true, DenyPatterns: []string{"x"}}, Limits: &jobs.Limits{MaxPagesPerHost: 5}}},
		{name: "empty object", body: `{}`, want: jobs.Request{}},
		{name: "unknown field", body: `{"seed":["http://127.0.0.2/"]}`, wantFields: []string{"seed"}},
		{name: "unknown nested field", body: `{"scope":{"same_host":true}}`, wantFields: []string{"same_host"}},
		{name: "wrong type", body: `{"limits":{"max_depth":"3"}}`, wantFields: []string{"limits.max_depth"}},
		{name: "negative count", body: `{"limits":{"max_pages":-1}}`, wantFields: []string{"limits.max_pages"}},
		{name: "malformed", body: `{"seeds": [`, wantMsg: "malformed JSON"},
		{name: "trailing data", body: `{} {}`, wantMsg: "malformed JSON: data after the JSON object"},
		{name: "not an object", body: `["http://127.0.0.2/"]`, wantFields: []string{""}},
		{name: "empty", body: ``, wantMsg: "malformed JSON: EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := jobs.Decode(strings.NewReader(tt.body))
			var fe jobs.FieldErrors
			switch {
			case tt.wantFields != nil:
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v, want field errors %v", err, tt.wantFields)
				}
				var fields []string
				for _, f := range fe {
					fields = append(fields, f.Field)
				}
				if !reflect.DeepEqual(fields, tt.wantFields) {
					t.Errorf("fields %v, want %v (%v)", fields, tt.wantFields, err)
				}
			case tt.wantMsg != "":
				if err == nil || errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("err = %v, want a plain error containing %q", err, tt.wantMsg)
				}
			case err != nil:
				t.Fatalf("decode: %v", err)
			case !reflect.DeepEqual(got, tt.want):
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecodeWrapsReadErrors(t *testing.T) {
	boom := errors.New("disk on fire")
	if _, err := jobs.Decode(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Errorf("err = %v, want it to wrap %v", err, boom)
	}
}
