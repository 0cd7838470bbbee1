package rendersniff

import (
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

func TestMode(t *testing.T) {
	shell := []byte(`<html><head><script src="/app.js"></script></head><body><div id="app"></div></body></html>`)
	article := []byte(`<html><body><p>` + strings.Repeat("A server-rendered paragraph of real text. ", 8) + `</p><script src="/a.js"></script></body></html>`)
	for _, c := range []struct {
		mode   Mode
		body   []byte
		ct     string
		render bool
		reason string
	}{
		{Never, shell, "text/html", false, ReasonNever},
		{Auto, shell, "text/html", true, ReasonAppRoot},
		{Auto, article, "text/html", false, ReasonHasText},
		{Always, article, "text/html", true, ReasonAlways},
		{Always, []byte(`{"a":1}`), "application/json", false, ReasonNotHTML},
	} {
		v := c.mode.Render(c.body, c.ct)
		if v.Render != c.render || v.Reason != c.reason {
			t.Errorf("%v on %.20q: %+v, want render %v reason %q", c.mode, c.body, v, c.render, c.reason)
		}
	}
	for _, s := range []string{"never", "auto", "always"} {
		m, err := ParseMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("sometimes"); err == nil {
		t.Error("ParseMode accepted sometimes")
	}
}

// TestModeOfSpec: a Mode and a specification's render mode map both
// ways; UNSPECIFIED and a value this build does not know are Never.
func TestModeOfSpec(t *testing.T) {
	for _, m := range []Mode{Never, Auto, Always} {
		if got := ModeOf(m.Spec()); got != m {
			t.Errorf("ModeOf(%v.Spec()) = %v", m, got)
		}
	}
	for _, sm := range []crawlv1.RenderMode{crawlv1.RenderMode_RENDER_MODE_UNSPECIFIED, 17} {
		if got := ModeOf(sm); got != Never {
			t.Errorf("ModeOf(%v) = %v, want never", sm, got)
		}
	}
}
