package crawlsettings

import (
	"math"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/hostdelay"
	"github.com/trawl-crawler/trawl/libs/identity"
)

func TestResolve(t *testing.T) {
	fleet := Fleet{MaxPages: 500, MaxDepth: 7, Politeness: hostdelay.Fleet{Delay: 2 * time.Second}}
	tests := []struct {
		name  string
		spec  *crawlv1.CrawlSpec
		fleet Fleet
		want  Settings
	}{
		{
			name: "no spec: the fleet's", fleet: fleet,
			want: Settings{Pages: 500, PagesFrom: FromFleet, Depth: 7, DepthFrom: FromFleet},
		},
		{
			name: "no spec, unlimited fleet", fleet: Fleet{MaxDepth: 3},
			want: Settings{Pages: 0, PagesFrom: Unset, Depth: 3, DepthFrom: FromFleet},
		},
		{
			name: "negative fleet budget is unlimited", fleet: Fleet{MaxPages: -1},
			want: Settings{Pages: 0, PagesFrom: Unset, Depth: 0, DepthFrom: FromFleet},
		},
		{
			name:  "the spec's limits win",
			spec:  &crawlv1.CrawlSpec{Limits: &crawlv1.Limits{MaxPages: 40, MaxDepth: 2, MaxPagesPerHost: 9}},
			fleet: fleet,
			want:  Settings{Pages: 40, PagesFrom: FromSpec, Depth: 2, DepthFrom: FromSpec, PagesPerHost: 9},
		},
		{
			name:  "zero limits are unset",
			spec:  &crawlv1.CrawlSpec{Limits: &crawlv1.Limits{}},
			fleet: fleet,
			want:  Settings{Pages: 500, PagesFrom: FromFleet, Depth: 7, DepthFrom: FromFleet},
		},
		{
			name:  "huge limits clamp",
			spec:  &crawlv1.CrawlSpec{Limits: &crawlv1.Limits{MaxPages: math.MaxUint64, MaxPagesPerHost: math.MaxUint64}},
			fleet: fleet,
			want:  Settings{Pages: math.MaxInt64, PagesFrom: FromSpec, Depth: 7, DepthFrom: FromFleet, PagesPerHost: math.MaxInt64},
		},
		{
			name: "politeness",
			spec: &crawlv1.CrawlSpec{Politeness: &crawlv1.Politeness{
				Delay: durationpb.New(3 * time.Second), MaxCrawlDelay: durationpb.New(10 * time.Second)}},
			fleet: fleet,
			want: Settings{Pages: 500, PagesFrom: FromFleet, Depth: 7, DepthFrom: FromFleet,
				Politeness: hostdelay.Crawl{Delay: 3 * time.Second, MaxCrawlDelay: 10 * time.Second}},
		},
		{
			name: "identity, documents and the result pages' exemption",
			spec: &crawlv1.CrawlSpec{
				Identity: &crawlv1.Identity{UserAgent: " examplebot/1.0 (+https://example.org/bot) ",
					Headers: []*crawlv1.Header{{Name: "Accept-Language", Value: "zh-CN"}}},
				Documents:  &crawlv1.Documents{ContentTypes: []string{"application/pdf"}},
				Politeness: &crawlv1.Politeness{SerpIgnoreRobots: true},
			},
			fleet: fleet,
			want: Settings{Pages: 500, PagesFrom: FromFleet, Depth: 7, DepthFrom: FromFleet,
				Identity: Identity{UserAgent: "examplebot/1.0 (+https://example.org/bot)", Agent: "examplebot",
					Headers: []identity.Header{{Name: "Accept-Language", Value: "zh-CN"}}},
				Documents: []string{"application/pdf"}, SERPIgnoreRobots: true},
		},
		{
			name:  "a refused user agent is not sent",
			spec:  &crawlv1.CrawlSpec{Identity: &crawlv1.Identity{UserAgent: "Mozilla/5.0"}},
			fleet: fleet,
			want: Settings{Pages: 500, PagesFrom: FromFleet, Depth: 7, DepthFrom: FromFleet,
				IdentityRefused: []string{"user agent: " + identity.CheckUserAgent("Mozilla/5.0").Error()}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Fleet = tt.fleet.Politeness.WithDefaults()
			tt.want.Render, tt.want.RenderFrom = crawlv1.RenderMode_RENDER_MODE_NEVER, FromFleet
			if got := Resolve(tt.spec, tt.fleet); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve = %+v\nwant      %+v", got, tt.want)
			}
		})
	}
}

// TestRenderOf: a page's render mode is that of the first render.sites
// entry naming its host (with or without the port), else the crawl's
// render.mode, else the fleet's --render; UNSPECIFIED (and a value this
// build does not know) is the next level's.
func TestRenderOf(t *testing.T) {
	const (
		unset  = crawlv1.RenderMode_RENDER_MODE_UNSPECIFIED
		never  = crawlv1.RenderMode_RENDER_MODE_NEVER
		auto   = crawlv1.RenderMode_RENDER_MODE_AUTO
		always = crawlv1.RenderMode_RENDER_MODE_ALWAYS
	)
	sites := []*crawlv1.RenderSite{
		{Hosts: []string{"app.example", "Shop.Example:8080"}, Mode: always},
		{Hosts: []string{"docs.example"}, Mode: never},
		{Hosts: []string{"app.example"}, Mode: never}, // shadowed by the first
		{Hosts: []string{"plain.example"}},            // unspecified: the crawl's
		{Hosts: []string{"future.example"}, Mode: 99}, // unknown: the crawl's
	}
	tests := []struct {
		name  string
		spec  *crawlv1.CrawlSpec
		fleet crawlv1.RenderMode
		host  string
		want  crawlv1.RenderMode
		from  Source
	}{
		{name: "no spec, fleet unset", host: "a.example", want: never, from: FromFleet},
		{name: "no spec, fleet auto", fleet: auto, host: "a.example", want: auto, from: FromFleet},
		{name: "spec without mode", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{}}, fleet: auto, host: "a.example", want: auto, from: FromFleet},
		{name: "spec mode wins", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: never}}, fleet: always, host: "a.example", want: never, from: FromSpec},
		{name: "unknown spec mode", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: 42}}, fleet: auto, host: "a.example", want: auto, from: FromFleet},
		{name: "site by name", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: auto, Sites: sites}}, host: "app.example", want: always, from: FromSpec},
		{name: "site by name, host with port", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: auto, Sites: sites}}, host: "app.example:8443", want: always, from: FromSpec},
		{name: "site by key, case", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: auto, Sites: sites}}, host: "shop.example:8080", want: always, from: FromSpec},
		{name: "site by key, other port", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: auto, Sites: sites}}, host: "shop.example:9090", want: auto, from: FromSpec},
		{name: "site never", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: always, Sites: sites}}, host: "docs.example", want: never, from: FromSpec},
		{name: "site unspecified", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: always, Sites: sites}}, host: "plain.example", want: always, from: FromSpec},
		{name: "site unknown mode", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Mode: always, Sites: sites}}, host: "future.example", want: always, from: FromSpec},
		{name: "sites over the fleet's mode", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Sites: sites}}, fleet: auto, host: "docs.example", want: never, from: FromFleet},
		{name: "no site matches", spec: &crawlv1.CrawlSpec{Render: &crawlv1.Render{Sites: sites}}, fleet: auto, host: "b.example", want: auto, from: FromFleet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Resolve(tt.spec, Fleet{Render: tt.fleet})
			if got := s.RenderOf(tt.host); got != tt.want || s.RenderFrom != tt.from {
				t.Errorf("RenderOf(%q) = %v from %v, want %v from %v", tt.host, got, s.RenderFrom, tt.want, tt.from)
			}
		})
	}
	if s := Resolve(&crawlv1.CrawlSpec{Render: &crawlv1.Render{OtherHosts: true}}, Fleet{}); !s.RenderOtherHosts {
		t.Error("render.other_hosts did not reach RenderOtherHosts")
	}
	if s := Resolve(nil, Fleet{}); s.RenderOtherHosts {
		t.Error("RenderOtherHosts without a spec")
	}
}

// TestDelay checks that Settings.Delay is libs/hostdelay's rule on the
// resolved politeness: the fetcher and the console both call it.
func TestDelay(t *testing.T) {
	fleet := Fleet{Politeness: hostdelay.Fleet{Delay: time.Second, MaxCrawlDelay: 20 * time.Second}}
	spec := &crawlv1.CrawlSpec{Politeness: &crawlv1.Politeness{
		Delay: durationpb.New(2 * time.Second), MaxCrawlDelay: durationpb.New(5 * time.Second)}}
	tests := []struct {
		spec       *crawlv1.CrawlSpec
		crawlDelay time.Duration
		want       time.Duration
		capped     bool
		cap        time.Duration
	}{
		{nil, 0, time.Second, false, 20 * time.Second},
		{nil, 30 * time.Second, 20 * time.Second, true, 20 * time.Second},
		{spec, 0, 2 * time.Second, false, 5 * time.Second},
		{spec, 4 * time.Second, 4 * time.Second, false, 5 * time.Second},
		{spec, 9 * time.Second, 5 * time.Second, true, 5 * time.Second},
	}
	for _, tt := range tests {
		s := Resolve(tt.spec, fleet)
		got, capped := s.Delay(tt.crawlDelay)
		if got != tt.want || capped != tt.capped {
			t.Errorf("spec %v, Crawl-delay %v: Delay = %v, %v; want %v, %v", tt.spec != nil, tt.crawlDelay, got, capped, tt.want, tt.capped)
		}
		if c := s.MaxCrawlDelay(); c != tt.cap {
			t.Errorf("spec %v: MaxCrawlDelay = %v, want %v", tt.spec != nil, c, tt.cap)
		}
	}
}

func TestSourceString(t *testing.T) {
	for s, want := range map[Source]string{Unset: "unset", FromSpec: "spec", FromFleet: "fleet"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", s, got, want)
		}
	}
}
