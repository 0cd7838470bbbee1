package hostdelay

import (
	"testing"
	"time"
)

func TestEffective(t *testing.T) {
	s := time.Second
	tests := []struct {
		name       string
		fleet      Fleet
		crawl      Crawl
		crawlDelay time.Duration
		want       time.Duration
		capped     bool
	}{
		{"defaults, no Crawl-delay", Fleet{}, Crawl{}, 0, s, false},
		{"Crawl-delay above the floor", Fleet{}, Crawl{}, 5 * s, 5 * s, false},
		// The console used to show 60 s here: without max_crawl_delay the
		// fleet's 30 s cap applies.
		{"no max_crawl_delay: the fleet's cap", Fleet{}, Crawl{}, 60 * s, 30 * s, true},
		{"the crawl's cap", Fleet{}, Crawl{MaxCrawlDelay: 10 * s}, 60 * s, 10 * s, true},
		{"the crawl's cap above the fleet's", Fleet{}, Crawl{MaxCrawlDelay: 90 * s}, 60 * s, 60 * s, false},
		// And 1 s here: a Crawl-delay below the crawl's delay leaves the
		// crawl's delay.
		{"Crawl-delay below the crawl's delay", Fleet{}, Crawl{Delay: 3 * s}, 2 * s, 3 * s, false},
		// And 1 s for a fleet at 250 ms, 2 s for one at 2 s.
		{"a fleet floor below the default", Fleet{Delay: 250 * time.Millisecond}, Crawl{}, 0, 250 * time.Millisecond, false},
		{"a fleet floor no crawl lowers", Fleet{Delay: 2 * s}, Crawl{Delay: 500 * time.Millisecond}, 0, 2 * s, false},
		{"a cap below the floor is raised to it", Fleet{Delay: 2 * s}, Crawl{MaxCrawlDelay: s}, 5 * s, 2 * s, true},
		{"a fleet cap below its floor", Fleet{Delay: 5 * s, MaxCrawlDelay: 2 * s}, Crawl{}, 10 * s, 5 * s, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, capped := Effective(tt.fleet, tt.crawl, tt.crawlDelay)
			if got != tt.want || capped != tt.capped {
				t.Errorf("Effective(%+v, %+v, %s) = %s, capped %v; want %s, capped %v", tt.fleet, tt.crawl, tt.crawlDelay, got, capped, tt.want, tt.capped)
			}
		})
	}
}

// FuzzEffective: the delay is never below the floor or the crawl's delay,
// and never above the largest of the cap, the crawl's delay and the floor.
func FuzzEffective(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(time.Second), int64(30*time.Second), int64(2*time.Second), int64(0), int64(60*time.Second))
	f.Fuzz(func(t *testing.T, floor, fleetMax, crawlMin, crawlMax, crawlDelay int64) {
		fl := Fleet{Delay: time.Duration(floor), MaxCrawlDelay: time.Duration(fleetMax)}
		c := Crawl{Delay: time.Duration(crawlMin), MaxCrawlDelay: time.Duration(crawlMax)}
		d, capped := Effective(fl, c, time.Duration(crawlDelay))
		w := fl.WithDefaults()
		capAt := w.MaxCrawlDelay
		if c.MaxCrawlDelay > 0 {
			capAt = c.MaxCrawlDelay
		}
		if d < w.Delay || d < c.Delay {
			t.Fatalf("%s below the floor %s or the crawl's delay %s", d, w.Delay, c.Delay)
		}
		if d > max(capAt, c.Delay, w.Delay) {
			t.Fatalf("%s above the cap %s, the crawl's delay %s and the floor %s", d, capAt, c.Delay, w.Delay)
		}
		if capped != (time.Duration(crawlDelay) > capAt) {
			t.Fatalf("capped %v for a Crawl-delay %s and a cap %s", capped, time.Duration(crawlDelay), capAt)
		}
	})
}
