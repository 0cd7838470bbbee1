package rendersniff

import (
	"fmt"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// Mode is when a crawl's pages are rendered in a browser (the fetcher's
// --render).
type Mode uint8

// Modes. The zero Mode is Never.
const (
	Never  Mode = iota // no page is rendered
	Auto               // the pages NeedsRender says need it
	Always             // every HTML page
)

var modeNames = [...]string{Never: "never", Auto: "auto", Always: "always"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "mode(?)"
}

// ParseMode reads never, auto or always.
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return Never, fmt.Errorf("render mode %q: want never, auto or always", s)
}

// ModeOf is the Mode of a crawl specification's render mode (NEVER for
// UNSPECIFIED: crawlsettings resolves that to the fleet's first).
func ModeOf(m crawlv1.RenderMode) Mode {
	switch m {
	case crawlv1.RenderMode_RENDER_MODE_AUTO:
		return Auto
	case crawlv1.RenderMode_RENDER_MODE_ALWAYS:
		return Always
	default:
		return Never
	}
}

// Spec is m as a crawl specification says it.
func (m Mode) Spec() crawlv1.RenderMode {
	switch m {
	case Auto:
		return crawlv1.RenderMode_RENDER_MODE_AUTO
	case Always:
		return crawlv1.RenderMode_RENDER_MODE_ALWAYS
	default:
		return crawlv1.RenderMode_RENDER_MODE_NEVER
	}
}

// ReasonAlways is the Verdict's Reason when Mode Always renders an HTML
// page; ReasonNever when Mode Never does not look. ReasonNoBrowser is the
// fetcher's, when a page's mode would render it but no browser can (no
// Chromium): the page is kept as fetched.
const (
	ReasonAlways    = "always"
	ReasonNever     = "never"
	ReasonNoBrowser = "no_browser"
)

// Render decides whether a fetched page is rendered under m: never under
// Never; an HTML page under Always; under Auto, as NeedsRender says.
func (m Mode) Render(body []byte, contentType string) Verdict {
	switch m {
	case Auto:
		return NeedsRender(body, contentType)
	case Always:
		if !isHTML(body, contentType) {
			return Verdict{Reason: ReasonNotHTML}
		}
		return Verdict{Render: true, Reason: ReasonAlways}
	}
	return Verdict{Reason: ReasonNever}
}
