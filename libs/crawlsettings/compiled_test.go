package crawlsettings

import (
	"errors"
	"testing"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// TestCompiled: a specification is compiled once per revision (the same
// value while the follower holds the same spec), again when another
// revision or another value of the spec arrives, per crawl; a compile
// error is reported once per revision and its value kept.
func TestCompiled(t *testing.T) {
	compiles := 0
	var errs []string
	c := NewCompiled(func(spec *crawlv1.CrawlSpec) (string, error) {
		compiles++
		if spec.GetName() == "bad" {
			return "partial", errors.New("bad rule")
		}
		return spec.GetName(), nil
	}, func(crawlID string, err error) { errs = append(errs, crawlID+": "+err.Error()) })

	r1 := &crawlv1.CrawlSpec{CrawlId: "a", Revision: 1, Name: "one"}
	if got := c.Get("a", r1); got != "one" || compiles != 1 {
		t.Fatalf("first Get = %q after %d compiles, want one after 1", got, compiles)
	}
	if got := c.Get("a", r1); got != "one" || compiles != 1 {
		t.Fatalf("same spec: %q after %d compiles, want one, still 1", got, compiles)
	}
	r2 := &crawlv1.CrawlSpec{CrawlId: "a", Revision: 2, Name: "two"}
	if got := c.Get("a", r2); got != "two" || compiles != 2 {
		t.Fatalf("next revision: %q after %d compiles, want two after 2", got, compiles)
	}
	if got := c.Get("b", &crawlv1.CrawlSpec{CrawlId: "b", Revision: 2, Name: "bee"}); got != "bee" || compiles != 3 {
		t.Fatalf("another crawl: %q after %d compiles, want bee after 3", got, compiles)
	}
	bad := &crawlv1.CrawlSpec{CrawlId: "a", Revision: 3, Name: "bad"}
	for range 2 {
		if got := c.Get("a", bad); got != "partial" {
			t.Fatalf("a spec with an error: %q, want the value compile kept", got)
		}
	}
	if len(errs) != 1 || errs[0] != "a: bad rule" || compiles != 4 {
		t.Fatalf("errors %v after %d compiles, want one for a after 4", errs, compiles)
	}
}
