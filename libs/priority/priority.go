// Package priority ranks a crawl's URLs best first (seed 001's third
// order; issue 38). A URL's priority is the sum of its signals, computed
// by the scheduler where the URL is admitted and carried with it in
// FetchRequest.priority:
//
//   - rules of the crawl's specification (CrawlSpec.priority.rules): every
//     rule whose RE2 pattern matches the canonical URL, on a host it names
//     (or any host), adds its delta;
//   - a sitemap's <priority> (0.0 to 1.0, the protocol's default 0.5):
//     (p − 0.5) × 20, so −10 to +10; and its <lastmod>: +2 within a week,
//     +1 within 30 days;
//   - the in-links the crawl has seen: +1 for each doubling
//     (⌊log₂ n⌋: 1 in-link 0, 2–3 +1, 4–7 +2, …, at most +16).
//
// The sum is clamped to [Min, Max]. A host's queue in the fetcher takes the
// highest priority first, then the lowest depth, then the oldest (Rank):
// with no signal every URL has priority 0 and the order is today's
// breadth-first per host. A crawl whose specification sets breadth_first
// ignores every signal.
//
// The package is pure: no I/O; its inputs are values.
package priority

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"regexp"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// Bounds of a priority and of a rule's delta.
const (
	Min int32 = -1000
	Max int32 = 1000
)

// MaxInLinksBoost is the most the in-links signal adds (2¹⁶ in-links).
const MaxInLinksBoost = 16

// MaxRules is how many rules a crawl may have.
const MaxRules = 256

// Signals is the set of signals that made a priority.
type Signals uint8

// The signals.
const (
	Rule Signals = 1 << iota
	Sitemap
	InLinks
)

var signalNames = []string{"rule", "sitemap", "inlinks"}

// String names the signals joined by '+' ("rule+inlinks"); "" for none.
func (s Signals) String() string {
	if s == 0 {
		return ""
	}
	var b strings.Builder
	for i, name := range signalNames {
		if s&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('+')
		}
		b.WriteString(name)
	}
	return b.String()
}

// Input is what a URL's priority is computed from.
type Input struct {
	URL  string // canonical
	Host string // politeness key (host[:port])
	// SitemapPriority is a sitemap entry's <priority> when HasSitemap.
	SitemapPriority float32
	HasSitemap      bool
	Lastmod         time.Time // a sitemap entry's <lastmod>; zero: none
	Now             time.Time
	InLinks         uint32 // pages seen linking the URL; 0 or 1: none known besides its parent
}

// rule is one compiled PriorityRule.
type rule struct {
	re    *regexp.Regexp
	delta int32
	hosts map[string]bool // nil: every host
}

// Rules are a crawl's compiled priority settings. The zero value and nil
// rank by the default signals (sitemaps and in-links) with no rule.
type Rules struct {
	rules        []rule
	breadthFirst bool
}

// Compile builds the rules of a crawl's Priority (nil: the defaults). An
// invalid rule is reported in the error and left out; the returned rules
// are always usable.
func Compile(p *crawlv1.Priority) (*Rules, error) {
	r := &Rules{breadthFirst: p.GetBreadthFirst()}
	var errs []error
	if n := len(p.GetRules()); n > MaxRules {
		errs = append(errs, fmt.Errorf("priority: %d rules, at most %d", n, MaxRules))
	}
	for i, pr := range p.GetRules() {
		if i >= MaxRules {
			break
		}
		if err := checkRule(pr); err != nil {
			errs = append(errs, fmt.Errorf("priority rule %d: %w", i+1, err))
			continue
		}
		re := regexp.MustCompile(pr.GetPattern()) // checkRule compiled it
		c := rule{re: re, delta: pr.GetDelta()}
		if len(pr.GetHosts()) > 0 {
			c.hosts = make(map[string]bool, len(pr.GetHosts()))
			for _, h := range pr.GetHosts() {
				c.hosts[strings.ToLower(h)] = true
			}
		}
		r.rules = append(r.rules, c)
	}
	return r, errors.Join(errs...)
}

// Validate reports what is wrong with a crawl's Priority, for the faces
// that take a specification (the API, the console, the launcher).
func Validate(p *crawlv1.Priority) error {
	_, err := Compile(p)
	return err
}

func checkRule(pr *crawlv1.PriorityRule) error {
	if pr.GetPattern() == "" {
		return errors.New("empty pattern")
	}
	if _, err := regexp.Compile(pr.GetPattern()); err != nil {
		return fmt.Errorf("pattern %q: %w", pr.GetPattern(), err)
	}
	if d := pr.GetDelta(); d < Min || d > Max {
		return fmt.Errorf("delta %d not in [%d, %d]", d, Min, Max)
	}
	if pr.GetDelta() == 0 {
		return fmt.Errorf("pattern %q: delta 0 changes nothing", pr.GetPattern())
	}
	for _, h := range pr.GetHosts() {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("host %q is not a host name", h)
		}
	}
	return nil
}

// BreadthFirst reports whether the crawl ignores every signal.
func (r *Rules) BreadthFirst() bool { return r != nil && r.breadthFirst }

// Of returns a URL's priority and the signals that made it.
func (r *Rules) Of(in Input) (int32, Signals) {
	if r.BreadthFirst() {
		return 0, 0
	}
	var (
		sum     int64
		signals Signals
	)
	if r != nil && len(r.rules) > 0 {
		name := urlcanon.Hostname(in.Host)
		for i := range r.rules {
			c := &r.rules[i]
			if c.hosts != nil && !c.hosts[in.Host] && !c.hosts[name] {
				continue
			}
			if c.re.MatchString(in.URL) {
				sum += int64(c.delta)
				signals |= Rule
			}
		}
	}
	if b := SitemapBoost(in.SitemapPriority, in.HasSitemap, in.Lastmod, in.Now); b != 0 {
		sum += int64(b)
		signals |= Sitemap
	}
	if b := InLinksBoost(in.InLinks); b != 0 {
		sum += int64(b)
		signals |= InLinks
	}
	return clamp(sum), signals
}

// SitemapBoost is what a sitemap entry adds: (p − 0.5) × 20 rounded, for a
// <priority> p (clamped to 0..1; absent: 0.5), plus 2 for a <lastmod>
// within a week of now, 1 within 30 days.
func SitemapBoost(p float32, has bool, lastmod, now time.Time) int32 {
	var b int32
	if has && !math.IsNaN(float64(p)) {
		p = min(max(p, 0), 1)
		b = int32(math.Round(float64(p-0.5) * 20))
	}
	if !lastmod.IsZero() && !now.IsZero() && !lastmod.After(now.Add(time.Hour)) {
		switch age := now.Sub(lastmod); {
		case age <= 7*24*time.Hour:
			b += 2
		case age <= 30*24*time.Hour:
			b++
		}
	}
	return b
}

// InLinksBoost is what n in-links add: ⌊log₂ n⌋, at most MaxInLinksBoost.
func InLinksBoost(n uint32) int32 {
	if n <= 1 {
		return 0
	}
	return int32(min(bits.Len32(n)-1, MaxInLinksBoost))
}

// Rank orders a host's queue: lower goes first. The priority, highest
// first, then the depth, lowest first (breadth-first as the tie-breaker);
// the queue breaks equal ranks by arrival.
func Rank(priority int32, depth uint32) uint32 {
	p := clamp(int64(priority))
	return uint32(Max-p)<<16 | min(depth, 0xffff)
}

func clamp(v int64) int32 {
	return int32(min(max(v, int64(Min)), int64(Max)))
}

// ParseRule reads a launcher rule "PATTERN=+N" or "PATTERN=-N": the last
// '=' splits, so a pattern may hold '='. Rules limited to hosts are given
// in a specification (PriorityRule.hosts).
func ParseRule(s string) (*crawlv1.PriorityRule, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 || i == len(s)-1 {
		return nil, fmt.Errorf("priority rule %q: want PATTERN=+N or PATTERN=-N", s)
	}
	var delta int32
	if _, err := fmt.Sscanf(s[i+1:], "%d", &delta); err != nil || strings.TrimLeft(s[i+1:], "+-0123456789") != "" {
		return nil, fmt.Errorf("priority rule %q: %q is not a whole number", s, s[i+1:])
	}
	pr := &crawlv1.PriorityRule{Pattern: s[:i], Delta: delta}
	if err := checkRule(pr); err != nil {
		return nil, fmt.Errorf("priority rule %q: %w", s, err)
	}
	return pr, nil
}

// ParseSignals reads what String wrote; unknown names are ignored.
func ParseSignals(s string) Signals {
	var out Signals
	for s != "" {
		name := s
		if i := strings.IndexByte(s, '+'); i >= 0 {
			name, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		for i, n := range signalNames {
			if n == name {
				out |= 1 << i
			}
		}
	}
	return out
}
