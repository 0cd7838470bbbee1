package browser

import (
	"net/http"
	"time"
)

// Outcome is how a page load ended. Every load that returns a Page ends in
// one of these; a load that returns an error (the tab or the browser
// crashed, the caller's context ended) has none.
type Outcome string

// The outcomes of a page load, a bounded set (fit for a metric label).
const (
	// OutcomeSettled: the load event fired and the network was idle for
	// Options.SettleIdle. HTML is the DOM as it then stood.
	OutcomeSettled Outcome = "settled"
	// OutcomeTimeout: the page did not settle within Options.PageTimeout
	// (a request that never ends, a script that polls forever, a script
	// that never yields). HTML is the DOM as it stood at the limit; a
	// script that kept the DOM from being read (while(true){}) was
	// terminated first, and its tab closed and replaced.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeHung: at the limit the DOM could not be read even after the
	// page's script was terminated. HTML is empty; the tab was closed and
	// will be replaced.
	OutcomeHung Outcome = "hung"
	// OutcomeNavigatedAway: the page, or a redirect of it, tried to go to
	// another URL (another host, or another page of its host), which a
	// page load must not fetch. The navigation was blocked (counted in
	// Blocked); HTML is the page's own DOM, or empty when the page itself
	// never arrived (its redirect went elsewhere).
	OutcomeNavigatedAway Outcome = "navigated_away"
	// OutcomeDownload: the page is a download (Content-Disposition:
	// attachment); it was refused and HTML is empty.
	OutcomeDownload Outcome = "download"
	// OutcomeRobots: Options.Allow refused the page; nothing was loaded.
	OutcomeRobots Outcome = "robots"
	// OutcomeFailed: the navigation failed (connection refused, DNS, TLS);
	// Page.Error says why.
	OutcomeFailed Outcome = "failed"
)

// The reasons a request of the page was blocked, a bounded set: the keys
// of Page.Blocked and Stats.Blocked.
const (
	BlockedType        = "type"         // an image, media, font, beacon, prefetch, … (see blockedType)
	BlockedOtherHost   = "other_host"   // a host other than the page's
	BlockedRobots      = "robots"       // Options.Allow refused it
	BlockedMaxRequests = "max_requests" // past Options.MaxRequests
	BlockedNavigation  = "navigation"   // the page going to another page of its host
	BlockedDownload    = "download"     // Content-Disposition: attachment
	BlockedScheme      = "scheme"       // not http or https
)

// Page is what a page load saw.
type Page struct {
	URL      string // as asked
	FinalURL string // the document's URL at the end (after redirects)
	Status   int    // the HTTP status of the document; 0 when none arrived
	// HTML is the DOM serialized as it stood when the load ended
	// (document.documentElement.outerHTML, after the doctype).
	HTML    string
	Title   string
	Outcome Outcome
	Error   string // why the navigation failed (OutcomeFailed)

	// Requests is the number of requests let through to a server, the
	// page's own included; Blocked counts the others by reason (Blocked*
	// constants).
	Requests int
	Blocked  map[string]int
	// Dialogs is the number of alert, confirm, prompt and beforeunload
	// dialogs the page opened; each was dismissed.
	Dialogs int
	// Exchanges are the requests let through that got a response, in the
	// order the responses arrived: what a WARC archive of the load holds.
	Exchanges []Exchange
	Duration  time.Duration
}

// Exchange is one request the browser made and the response it got.
type Exchange struct {
	Method         string
	URL            string
	ResourceType   string // Chromium's: Document, Script, XHR, Fetch, Stylesheet, …
	RequestHeaders http.Header
	Status         int
	StatusText     string
	Header         http.Header // of the response
	// Body is the response body as the page got it, up to Options.MaxBody
	// bytes; Truncated says it was longer, or was not read (a redirect
	// has no body). Chromium hands it decoded of its Content-Encoding
	// while Header keeps the Content-Encoding line: an archive of it must
	// drop that line (or record the body as decoded).
	Body      []byte
	Truncated bool
}
