package websim

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Stats is what the web received, by resource.
type Stats struct {
	Requests   int `json:"requests"`    // every request, robots.txt included
	Robots     int `json:"robots"`      // robots.txt requests
	RobotsMore int `json:"robots_more"` // robots.txt requests beyond one per host
	Distinct   int `json:"distinct"`    // distinct resources requested, robots.txt excluded
	// Duplicates are requests of a resource that had already been
	// answered with something other than a 5xx or a dropped connection:
	// requests that fetched nothing new.
	Duplicates int `json:"duplicates"`
	// Retries are requests of a resource whose previous answer was a 5xx
	// or cut short: the retries of transient failures.
	Retries    int `json:"retries"`
	Offsite    int `json:"offsite"`    // requests to the host outside the crawl
	Disallowed int `json:"disallowed"` // requests under robots.txt's Disallow
	Pages      int `json:"pages"`      // distinct content pages fetched (index, lists, articles or products)
	PagesTotal int `json:"pages_total"`
	// Trap counts the requests of the calendar trap (bounded only by the
	// crawl's depth or page limits).
	Trap int `json:"trap"`
	// TrapDeep counts the requests of calendar months past the trap's
	// second hop: more than one link from the month the articles link
	// to. A person may want that month and the next; a crawler that
	// detects the trap stops here.
	TrapDeep int `json:"trap_deep"`
	// MostLinked counts the distinct pages fetched of the web's most
	// linked tenth (Web.MostLinked; a best-deep web only), of
	// MostLinkedTotal.
	MostLinked      int            `json:"most_linked,omitempty"`
	MostLinkedTotal int            `json:"most_linked_total,omitempty"`
	ByKind          map[string]int `json:"by_kind"`
	Bytes           int64          `json:"bytes"` // body bytes sent
	// Connections counts the TCP connections the crawler opened: a
	// polite client reuses one per host (HTTP keep-alive).
	Connections int       `json:"connections"`
	First       time.Time `json:"first"` // first and last request
	Last        time.Time `json:"last"`
	// LastPage is the first request of the last new content page, and
	// PageRequests the requests up to it: the crawl's throughput window,
	// apart from the tail of retries that wait out their back-off.
	LastPage     time.Time `json:"last_page"`
	PageRequests int       `json:"page_requests"`
	// DuplicateExamples lists up to ten resources requested more than once.
	DuplicateExamples []string `json:"duplicate_examples,omitempty"`
	// PageTimeline counts the new content pages by TimelineStep from
	// First: how the crawl's rate moved (QuarterRates).
	PageTimeline []int `json:"page_timeline,omitempty"`
}

// TimelineStep is the width of a Stats.PageTimeline slot.
const TimelineStep = 100 * time.Millisecond

// QuarterRates returns the distinct content pages per second in each
// quarter of the content window (First to LastPage), from PageTimeline: a
// crawl whose cost grows with its size slows down from one quarter to the
// next. Zeros when the window is empty.
func (s Stats) QuarterRates() [4]float64 {
	var out [4]float64
	window := s.LastPage.Sub(s.First)
	if window <= 0 {
		return out
	}
	var pages [4]int
	for i, n := range s.PageTimeline {
		q := int(4 * (time.Duration(i) * TimelineStep) / window)
		pages[min(q, 3)] += n
	}
	for q := range out {
		out[q] = float64(pages[q]) / (window.Seconds() / 4)
	}
	return out
}

// Coverage is the share of the content pages fetched.
func (s Stats) Coverage() float64 {
	if s.PagesTotal == 0 {
		return 0
	}
	return float64(s.Pages) / float64(s.PagesTotal)
}

// resource is one resource's history.
type resource struct {
	answered bool // answered with a final (non-5xx, complete) answer
	kind     string
	hits     []Hit
}

// Hit is one request of a resource: when it was answered and with what
// status (0: the connection was dropped before an answer).
//
// Arrived and Sent bound what the client saw, whatever the web's own
// scheduling: the request left the client before Arrived (the handler's
// start), and the client cannot have read the whole answer before Sent
// (the start of the handler's last write; its last bytes left after it).
// At, the handler's return, can come after the client read the answer
// when the handler's goroutine waits for a core.
type Hit struct {
	At      time.Time `json:"at"`
	Arrived time.Time `json:"arrived"`
	Sent    time.Time `json:"sent"`
	Status  int       `json:"status"`
}

// Gap is the quiet time the web can prove between the end of the answer
// to prev and the request next, two consecutive requests of one host: a
// lower bound of what the client waited between reading prev's answer and
// sending next. It is negative when next came before prev was answered.
func Gap(prev, next Hit) time.Duration { return next.Arrived.Sub(prev.Sent) }

// Resource is the history of one resource (robots.txt excluded): its
// identity (host index, path with dot segments resolved, escapes decoded,
// path parameters dropped, and its non-empty query), its kind and every
// request of it, in order.
type Resource struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Hits []Hit  `json:"hits"`
}

type stats struct {
	hosts int

	mu     sync.Mutex
	s      Stats
	res    map[string]*resource
	robots map[int]int
}

func newStats(hosts int) *stats {
	return &stats{hosts: hosts, res: make(map[string]*resource), robots: make(map[int]int),
		s: Stats{ByKind: make(map[string]int)}}
}

// resourceOf is the identity of the resource a request asks for: the host
// it reached, its path with dot segments resolved, escapes decoded and path
// parameters dropped, and its query when not empty.
func resourceOf(r *http.Request) string {
	h, _ := r.Context().Value(hostKey{}).(int)
	p := path.Clean("/" + stripPathParams(r.URL.Path))
	id := strconv.Itoa(h) + " " + p
	if q := r.URL.RawQuery; q != "" {
		if v, err := url.ParseQuery(q); err == nil {
			q = v.Encode()
		}
		id += "?" + q
	}
	return id
}

// record counts one answered request of resource id of host h; trapDeep
// says that it asked for a calendar month past the trap's second hop,
// mostLinked that it asked for one of the web's most linked pages.
func (st *stats) record(h int, id, kind string, trapDeep, mostLinked bool, hit Hit, bytes int64) {
	at, status := hit.At, hit.Status
	st.mu.Lock()
	defer st.mu.Unlock()
	s := &st.s
	s.Requests++
	if s.First.IsZero() {
		s.First = at
	}
	s.Last = at
	s.Bytes += bytes
	s.ByKind[kind]++
	switch kind {
	case KindRobots:
		s.Robots++
		st.robots[h]++
		if st.robots[h] > 1 {
			s.RobotsMore++
		}
		return
	case KindOffsite:
		s.Offsite++
	case KindPrivate:
		s.Disallowed++
	case KindTrap:
		s.Trap++
		if trapDeep {
			s.TrapDeep++
		}
	}
	final := status > 0 && status < 500
	r, ok := st.res[id]
	switch {
	case !ok:
		r = &resource{kind: kind}
		st.res[id] = r
		s.Distinct++
		if kind == KindIndex || kind == KindList || kind == KindArticle || kind == KindProduct {
			s.Pages++
			if mostLinked {
				s.MostLinked++
			}
			s.LastPage, s.PageRequests = at, s.Requests
			slot := int(at.Sub(s.First) / TimelineStep)
			for len(s.PageTimeline) <= slot {
				s.PageTimeline = append(s.PageTimeline, 0)
			}
			s.PageTimeline[slot]++
		}
	case r.answered:
		s.Duplicates++
		if len(s.DuplicateExamples) < 10 && !slices.ContainsFunc(s.DuplicateExamples, func(e string) bool { return strings.HasPrefix(e, id+" ") }) {
			// When: a replay within a millisecond is the HTTP client's,
			// seconds or minutes apart the crawler's.
			prev := r.hits[len(r.hits)-1]
			s.DuplicateExamples = append(s.DuplicateExamples, fmt.Sprintf("%s (at %s and %s)", id,
				prev.Arrived.Sub(s.First).Round(time.Millisecond), at.Sub(s.First).Round(time.Millisecond)))
		}
	default:
		s.Retries++
	}
	r.answered = r.answered || final
	r.hits = append(r.hits, hit)
}

// ContentIDs returns the resource IDs (as Resource.ID) of every content
// page: each host's index, list pages and articles (a shop's products);
// Pages() of them.
func (w *Web) ContentIDs() []string {
	out := make([]string, 0, w.Pages())
	if w.cfg.BestDeep {
		for h := range w.cfg.Hosts {
			for n := range deepPages {
				out = append(out, strconv.Itoa(h)+" "+deepPath(n))
			}
		}
		return out
	}
	if w.cfg.Shop {
		for h := range w.cfg.Hosts {
			out = append(out, w.shopContentIDs(h)...)
		}
		return out
	}
	for h := range w.cfg.Hosts {
		id := strconv.Itoa(h) + " "
		out = append(out, id+"/")
		for k := 1; k <= w.lists(); k++ {
			out = append(out, id+"/list?page="+strconv.Itoa(k))
		}
		for i := range w.cfg.Articles {
			out = append(out, id+w.articlePath(i))
		}
	}
	return out
}

// Resources returns the history of every resource requested (robots.txt
// excluded), sorted by ID: where Stats counts duplicates and retries, this
// says which resources had them and when.
func (w *Web) Resources() []Resource {
	st := w.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]Resource, 0, len(st.res))
	for id, r := range st.res {
		out = append(out, Resource{ID: id, Kind: r.kind, Hits: slices.Clone(r.hits)})
	}
	slices.SortFunc(out, func(a, b Resource) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Stats returns a snapshot of what the web received.
func (w *Web) Stats() Stats {
	st := w.stats
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.s
	s.ByKind = make(map[string]int, len(st.s.ByKind))
	for k, v := range st.s.ByKind {
		s.ByKind[k] = v
	}
	s.DuplicateExamples = slices.Clone(st.s.DuplicateExamples)
	s.PageTimeline = slices.Clone(st.s.PageTimeline)
	s.PagesTotal = w.Pages()
	s.Connections = int(w.conns.Load())
	return s
}
