package crawlspec_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/services/seeder/crawlspec"
)

func TestDecodeValidate(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		wantFields []string // "" = valid
	}{
		{"valid without seeds", `{"scope":{"same_host_only":true,"deny_patterns":["/sec1/"]},"limits":{"max_pages_per_host":3}}`, nil},
		{"unknown field", `{"scope":{"deny_pattern":["x"]}}`, []string{"deny_pattern"}},
		{"invalid regexp", `{"scope":{"allow_patterns":["("]}}`, []string{"scope.allow_patterns[0]"}},
		{"site rules", `{"scope":{"sites":[{"hosts":["a.test"],"deny_patterns":["/print/"]},{"domains":["b.test"],"allow_patterns":["/news/"]}]}}`, nil},
		{"site rule problems", `{"scope":{"sites":[{"allow_patterns":["/x/"]},{"hosts":["a.test"],"deny_patterns":["("]}]}}`,
			[]string{"scope.sites[0]", "scope.sites[1].deny_patterns[0]"}},
		{"near duplicates on", `{"scope":{"near_duplicate_distance":3}}`, nil},
		{"near duplicates too far", `{"scope":{"near_duplicate_distance":4}}`, []string{"scope.near_duplicate_distance"}},
		{"several problems", `{"crawl_id":"a b","seeds":["nope"],"politeness":{"delay":"soon"}}`, []string{"crawl_id", "seeds[0]", "politeness.delay"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := crawlspec.Decode(strings.NewReader(tt.body))
			if err == nil {
				err = crawlspec.Validate(req)
			}
			var fe crawlspec.FieldErrors
			switch {
			case tt.wantFields == nil && err != nil:
				t.Fatalf("err = %v, want valid", err)
			case tt.wantFields == nil:
				return
			case !errors.As(err, &fe):
				t.Fatalf("err = %v, want field errors", err)
			}
			var got []string
			for _, f := range fe {
				got = append(got, f.Field)
			}
			if strings.Join(got, " ") != strings.Join(tt.wantFields, " ") {
				t.Errorf("fields %v, want %v", got, tt.wantFields)
			}
		})
	}
}
