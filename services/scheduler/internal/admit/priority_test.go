package admit

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/priority"
	"github.com/trawl-crawler/trawl/services/scheduler/internal/dedup"
)

// ceiling is a BestBudget: left pages under the ceiling, then best more
// for the URLs whose priority is above 0.
type ceiling struct{ left, best int }

func (c *ceiling) Reserve(int, string) bool {
	if c.left <= 0 {
		return false
	}
	c.left--
	return true
}

func (c *ceiling) ReserveBest(int, string) bool {
	if c.best <= 0 {
		return false
	}
	c.best--
	return true
}

func (c *ceiling) Unreserve(_ int, _ string, n int64) { c.left += int(n) }

// specPriority is the priority rules of the crawls "rules" (/product/
// +50, ?sort= -5) and "bfs" (breadth-first); other crawls have none.
func specPriority(t *testing.T) func(crawlID string) *priority.Rules {
	t.Helper()
	rules, err := priority.Compile(&crawlv1.Priority{Rules: []*crawlv1.PriorityRule{
		{Pattern: `/product/`, Delta: 50},
		{Pattern: `\?sort=`, Delta: -5},
	}})
	if err != nil {
		t.Fatal(err)
	}
	bfs, err := priority.Compile(&crawlv1.Priority{BreadthFirst: true, Rules: []*crawlv1.PriorityRule{{Pattern: `.`, Delta: 9}}})
	if err != nil {
		t.Fatal(err)
	}
	return func(crawlID string) *priority.Rules {
		switch crawlID {
		case "rules":
			return rules
		case "bfs":
			return bfs
		}
		return nil
	}
}

func TestDecidePriority(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	seen := dedup.New(0)
	for _, c := range []string{"c1", "rules", "bfs"} {
		seen.Add(fingerprint.URL(c, "http://seen.example/"))
		seen.Add(fingerprint.URL(c, "http://seen.example/product/1"))
	}
	tests := []struct {
		name       string
		in         *crawlv1.DiscoveredURL
		partition  int
		budget     ceiling
		wantReason Reason // "" = admitted
		wantPrio   int32
		wantWhy    string
		wantRepri  bool // a reprioritize request
	}{
		{name: "no signal", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/x", Depth: 3}, budget: ceiling{left: 1}},
		{name: "a rule", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://a.example/product/7", Depth: 3}, budget: ceiling{left: 1}, wantPrio: 50, wantWhy: "rule"},
		{name: "a rule lowers", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://a.example/list?sort=asc"}, budget: ceiling{left: 1}, wantPrio: -5, wantWhy: "rule"},
		{name: "rules of another crawl", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/product/7"}, budget: ceiling{left: 1}},
		{name: "sitemap priority 1.0", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/s", Source: crawlv1.Source_SOURCE_SITEMAP, SitemapPriority: proto.Float32(1)}, budget: ceiling{left: 1}, wantPrio: 10, wantWhy: "sitemap"},
		{name: "sitemap priority 0.5 is no signal", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/s", Source: crawlv1.Source_SOURCE_SITEMAP, SitemapPriority: proto.Float32(0.5)}, budget: ceiling{left: 1}},
		{name: "sitemap lastmod this week", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/s", Source: crawlv1.Source_SOURCE_SITEMAP, Lastmod: timestamppb.New(now.Add(-24 * time.Hour))}, budget: ceiling{left: 1}, wantPrio: 2, wantWhy: "sitemap"},
		{name: "in-links", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/popular", InLinks: 4}, budget: ceiling{left: 1}, wantPrio: 2, wantWhy: "inlinks"},
		{name: "rule and in-links", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://a.example/product/8", InLinks: 2}, budget: ceiling{left: 1}, wantPrio: 51, wantWhy: "rule+inlinks"},
		{name: "breadth-first ignores every signal", in: &crawlv1.DiscoveredURL{CrawlId: "bfs", Url: "http://a.example/product/8", InLinks: 64, SitemapPriority: proto.Float32(1)}, budget: ceiling{left: 1}},
		{name: "a drop carries its priority", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://a.example/product/9", Depth: 6}, budget: ceiling{left: 1}, wantReason: TooDeep, wantPrio: 50, wantWhy: "rule"},
		{name: "another partition's url has none", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://other.example/product/9"}, budget: ceiling{left: 1}, wantReason: WrongPartition},

		// A known URL with new in-links: a reprioritize request.
		{name: "duplicate with in-links", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://seen.example/", Depth: 2, InLinks: 4}, budget: ceiling{left: 1}, wantReason: Duplicate, wantPrio: 2, wantWhy: "inlinks", wantRepri: true},
		{name: "duplicate with a rule and in-links", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://seen.example/product/1", Depth: 2, InLinks: 8}, budget: ceiling{left: 1}, wantReason: Duplicate, wantPrio: 53, wantWhy: "rule+inlinks", wantRepri: true},
		{name: "duplicate of a first sighting", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://seen.example/", InLinks: 1}, budget: ceiling{left: 1}, wantReason: Duplicate},
		{name: "duplicate without in-links", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://seen.example/product/1"}, budget: ceiling{left: 1}, wantReason: Duplicate, wantPrio: 50, wantWhy: "rule"},
		{name: "breadth-first duplicate sends none", in: &crawlv1.DiscoveredURL{CrawlId: "bfs", Url: "http://seen.example/", InLinks: 64}, budget: ceiling{left: 1}, wantReason: Duplicate},

		// The ceiling and its second allowance.
		{name: "past the ceiling without priority", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/late"}, budget: ceiling{best: 1}, wantReason: BudgetExhausted},
		{name: "past the ceiling with a lowered priority", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://a.example/late?sort=asc"}, budget: ceiling{best: 1}, wantReason: BudgetExhausted, wantPrio: -5, wantWhy: "rule"},
		{name: "past the ceiling with priority", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://a.example/product/late"}, budget: ceiling{best: 1}, wantPrio: 50, wantWhy: "rule"},
		{name: "second allowance used up", in: &crawlv1.DiscoveredURL{CrawlId: "rules", Url: "http://a.example/product/late"}, budget: ceiling{}, wantReason: BudgetExhausted, wantPrio: 50, wantWhy: "rule"},
		// Dropped as budget_exhausted, the URL is in no seen set: the
		// parser publishes it again when its in-links double, and it is
		// decided afresh, now with priority 1.
		{name: "dropped url back with in-links", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://a.example/late", InLinks: 2}, budget: ceiling{best: 1}, wantPrio: 1, wantWhy: "inlinks"},
		{name: "duplicate needs no budget", in: &crawlv1.DiscoveredURL{CrawlId: "c1", Url: "http://seen.example/", InLinks: 2}, budget: ceiling{}, wantReason: Duplicate, wantPrio: 1, wantWhy: "inlinks", wantRepri: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Policy{Depth: FixedDepth(5), Priority: specPriority(t), Partition: hostPartitions, Now: func() time.Time { return now }}
			b := tt.budget
			d := decide(t, p, tt.in, tt.partition, seen, &b)
			if d.Reason == Duplicate && tt.in.InLinks <= 1 && (d.Priority != 0 || d.PriorityReason != "") {
				t.Errorf("a duplicate without in-links got priority %d (%q): left for Prioritized", d.Priority, d.PriorityReason)
			}
			d = p.Prioritized(tt.in, d)
			if d.Reason != tt.wantReason || d.Admit != (tt.wantReason == "") {
				t.Fatalf("Admit %v Reason %q, want reason %q", d.Admit, d.Reason, tt.wantReason)
			}
			if d.Priority != tt.wantPrio || d.PriorityReason != tt.wantWhy {
				t.Errorf("priority %d (%q), want %d (%q)", d.Priority, d.PriorityReason, tt.wantPrio, tt.wantWhy)
			}
			if d.Admit && (d.Fetch.GetPriority() != tt.wantPrio || d.Fetch.GetPriorityReason() != tt.wantWhy || d.Fetch.GetReprioritize()) {
				t.Errorf("fetch request priority %d (%q, reprioritize %v), want %d (%q)", d.Fetch.GetPriority(), d.Fetch.GetPriorityReason(),
					d.Fetch.GetReprioritize(), tt.wantPrio, tt.wantWhy)
			}
			if (d.Reprioritize != nil) != tt.wantRepri {
				t.Fatalf("Reprioritize = %v, want one: %v", d.Reprioritize, tt.wantRepri)
			}
			if r := d.Reprioritize; r != nil {
				want := &crawlv1.FetchRequest{CrawlId: tt.in.CrawlId, Url: d.Canonical, UrlFp: d.FP, Depth: tt.in.Depth,
					Priority: tt.wantPrio, PriorityReason: tt.wantWhy, Reprioritize: true}
				if !proto.Equal(r, want) {
					t.Errorf("Reprioritize = %v, want %v", r, want)
				}
			}
			if spent, was := b.left+b.best, tt.budget.left+tt.budget.best; d.Admit != (spent == was-1) || !d.Admit && spent != was {
				t.Errorf("admit %v spent %d pages", d.Admit, was-spent)
			}
		})
	}
}
