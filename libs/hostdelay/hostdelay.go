// Package hostdelay is the one rule for the delay between two requests to
// one host: the fetcher applies it (politeness.Engine.SetHostDelay) and
// the operator console shows it, so that what a host page says applies is
// what applies.
package hostdelay

import "time"

// Fleet defaults: the fetcher's --delay and --max-crawl-delay.
const (
	DefaultDelay         = time.Second
	DefaultMaxCrawlDelay = 30 * time.Second
)

// Fleet is the fetchers' own politeness: their --delay, a floor no crawl
// lowers, and their --max-crawl-delay, the cap of a robots.txt
// Crawl-delay for a crawl that sets none. Zero fields take the defaults.
type Fleet struct {
	Delay         time.Duration
	MaxCrawlDelay time.Duration
}

// WithDefaults returns f with its zero fields defaulted, and a cap below
// the floor raised to it (the fetcher refuses such flags; a console told
// so shows what a fetcher would do).
func (f Fleet) WithDefaults() Fleet {
	if f.Delay <= 0 {
		f.Delay = DefaultDelay
	}
	if f.MaxCrawlDelay <= 0 {
		f.MaxCrawlDelay = DefaultMaxCrawlDelay
	}
	f.MaxCrawlDelay = max(f.MaxCrawlDelay, f.Delay)
	return f
}

// Crawl is a crawl's politeness (CrawlSpec.politeness): its delay and its
// cap of a Crawl-delay; zero where the crawl sets none.
type Crawl struct {
	Delay         time.Duration
	MaxCrawlDelay time.Duration
}

// Effective returns the delay that applies to a host whose robots.txt asks
// for crawlDelay (0: none) in crawl c on fleet f: the Crawl-delay capped
// at the crawl's max_crawl_delay (the fleet's cap when it sets none), then
// raised to the crawl's delay and to the fleet's floor. capped reports
// that the cap cut the Crawl-delay.
func Effective(f Fleet, c Crawl, crawlDelay time.Duration) (d time.Duration, capped bool) {
	f = f.WithDefaults()
	maxCrawlDelay := Cap(f, c)
	if crawlDelay > maxCrawlDelay {
		crawlDelay, capped = maxCrawlDelay, true
	}
	return max(crawlDelay, c.Delay, f.Delay), capped
}

// Cap returns the cap of a robots.txt Crawl-delay in crawl c on fleet f:
// the crawl's max_crawl_delay, else the fleet's (defaulted).
func Cap(f Fleet, c Crawl) time.Duration {
	if c.MaxCrawlDelay > 0 {
		return c.MaxCrawlDelay
	}
	return f.WithDefaults().MaxCrawlDelay
}
