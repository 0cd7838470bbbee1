package jobs_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

var now = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

func TestBuildKeywordSeeds(t *testing.T) {
	job, err := jobs.Build(jobs.Request{
		CrawlID: "kw",
		Seeds:   []string{"http://127.0.0.2/"},
		Keywords: &jobs.Keywords{Groups: [][]string{{"red", "blue"}, {"car"}}, Combine: "product",
			Engines: []string{"google"}, Pages: 2},
	}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobs.Seed{
		{URL: "http://127.0.0.2/"},
		{URL: "https://www.google.com/search?q=red+car&start=0", Engine: "google"},
		{URL: "https://www.google.com/search?q=red+car&start=10", Engine: "google"},
		{URL: "https://www.google.com/search?q=blue+car&start=0", Engine: "google"},
		{URL: "https://www.google.com/search?q=blue+car&start=10", Engine: "google"},
	}
	if len(job.Seeds) != len(want) {
		t.Fatalf("seeds %+v, want %+v", job.Seeds, want)
	}
	for i := range want {
		if job.Seeds[i] != want[i] {
			t.Errorf("seed %d = %+v, want %+v", i, job.Seeds[i], want[i])
		}
	}
	if s := job.Spec; s.GetRevision() != 1 || s.GetState() != crawlv1.CrawlState_CRAWL_STATE_RUNNING || !s.GetCreatedAt().AsTime().Equal(now) {
		t.Errorf("spec %v", s)
	}
}

func TestTransition(t *testing.T) {
	const (
		running   = crawlv1.CrawlState_CRAWL_STATE_RUNNING
		paused    = crawlv1.CrawlState_CRAWL_STATE_PAUSED
		cancelled = crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	)
	tests := []struct {
		name     string
		from, to crawlv1.CrawlState
		wantErr  error
	}{
		{"pause", running, paused, nil},
		{"resume", paused, running, nil},
		{"cancel paused", paused, cancelled, nil},
		{"resume cancelled", cancelled, running, jobs.ErrFinal},
		{"pause cancelled", cancelled, paused, jobs.ErrFinal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &crawlv1.CrawlSpec{CrawlId: "c", State: tt.from, Revision: 7, Name: "n"}
			next, err := jobs.Transition(spec, tt.to, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if next.GetRevision() != 8 || next.GetState() != tt.to || next.GetName() != "n" || spec.GetRevision() != 7 {
				t.Errorf("next %v (old %v)", next, spec)
			}
		})
	}
}

// TestDelete: a deletion is the next revision, cancelled for good and
// marked deleted; deleting a deleted crawl again changes nothing; nothing
// revives a deleted crawl.
func TestDelete(t *testing.T) {
	for _, from := range []crawlv1.CrawlState{crawlv1.CrawlState_CRAWL_STATE_RUNNING, crawlv1.CrawlState_CRAWL_STATE_PAUSED, crawlv1.CrawlState_CRAWL_STATE_CANCELLED} {
		spec := &crawlv1.CrawlSpec{CrawlId: "c", State: from, Revision: 3, Name: "n", CreatedAt: timestamppb.New(now.Add(-time.Hour))}
		next := jobs.Delete(spec, now)
		if next.GetRevision() != 4 || next.GetState() != crawlv1.CrawlState_CRAWL_STATE_CANCELLED || next.GetName() != "n" ||
			!next.GetDeletedAt().AsTime().Equal(now) || !next.GetUpdatedAt().AsTime().Equal(now) ||
			!next.GetCreatedAt().AsTime().Equal(now.Add(-time.Hour)) || spec.GetDeletedAt() != nil || spec.GetRevision() != 3 {
			t.Errorf("Delete from %v = %v (old %v)", from, next, spec)
		}
		if again := jobs.Delete(next, now.Add(time.Minute)); again != next {
			t.Errorf("a second Delete = %v, want the deleted spec unchanged", again)
		}
		if _, err := jobs.Transition(next, crawlv1.CrawlState_CRAWL_STATE_RUNNING, now); !errors.Is(err, jobs.ErrFinal) {
			t.Errorf("resume a deleted crawl: %v, want ErrFinal", err)
		}
		if _, err := jobs.Revise(next, spec, now); !errors.Is(err, jobs.ErrFinal) {
			t.Errorf("revise a deleted crawl: %v, want ErrFinal", err)
		}
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		state  crawlv1.CrawlState
		counts jobs.Counts
		have   bool
		want   string
	}{
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, Terminal: 2, Pending: 1, Queued: 1}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, Terminal: 3, Finished: true}, true, "drained"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, Terminal: 3, Finished: true, InFlight: 2}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, Terminal: 3, Finished: true, InFlight: -1}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, Terminal: 3, Finished: true}, false, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_PAUSED, jobs.Counts{Admitted: 3}, true, "paused"},
		{crawlv1.CrawlState_CRAWL_STATE_CANCELLED, jobs.Counts{Admitted: 3, Queued: 2}, true, "cancelled"},
	}
	for _, tt := range tests {
		if got := jobs.Status(tt.state, tt.counts, tt.have); got != tt.want {
			t.Errorf("Status(%v, %+v, %v) = %s, want %s", tt.state, tt.counts, tt.have, got, tt.want)
		}
	}
}

// TestBuildSerpIgnoreRobots: the exception to robots.txt for result pages
// reaches the spec only with keywords to apply it to; without them it is
// a field error.
func TestBuildSerpIgnoreRobots(t *testing.T) {
	polite := &jobs.Politeness{SerpIgnoreRobots: true}
	job, err := jobs.Build(jobs.Request{CrawlID: "kw", Politeness: polite,
		Keywords: &jobs.Keywords{Terms: []string{"solar"}, Engines: []string{"bing"}}}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if !job.Spec.GetPoliteness().GetSerpIgnoreRobots() || len(job.Seeds) != 1 || job.Seeds[0].Engine != "bing" {
		t.Errorf("spec politeness %v, seeds %+v; want the exception and one bing result page", job.Spec.GetPoliteness(), job.Seeds)
	}
	_, err = jobs.Build(jobs.Request{CrawlID: "s", Politeness: polite, Seeds: []string{"http://127.0.0.2/"}}, nil, now)
	var fe jobs.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "politeness.serp_ignore_robots" {
		t.Errorf("err = %v, want a politeness.serp_ignore_robots field error", err)
	}
}

func TestBuildSpecNeedsNoSeeds(t *testing.T) {
	scope := &jobs.Scope{SameHostOnly: true, DenyPatterns: []string{`/sec1/`}}
	if _, err := jobs.Build(jobs.Request{CrawlID: "c", Scope: scope}, nil, now); err == nil {
		t.Fatal("Build accepted a request without seeds")
	}
	job, err := jobs.BuildSpec(jobs.Request{CrawlID: "c", Scope: scope, Limits: &jobs.Limits{MaxDepth: 4}}, nil, now)
	if err != nil {
		t.Fatalf("BuildSpec: %v", err)
	}
	if len(job.Seeds) != 0 || !job.Spec.GetScope().GetSameHostOnly() || job.Spec.GetLimits().GetMaxDepth() != 4 {
		t.Errorf("job %+v", job)
	}
	// Everything else is still checked, seeds included.
	_, err = jobs.BuildSpec(jobs.Request{CrawlID: "c", Seeds: []string{"nope"}, Scope: &jobs.Scope{AllowPatterns: []string{"("}}}, nil, now)
	var fe jobs.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 2 || fe[0].Field != "seeds[0]" || fe[1].Field != "scope.allow_patterns[0]" {
		t.Errorf("err = %v, want seeds[0] and scope.allow_patterns[0]", err)
	}
}

func TestRevise(t *testing.T) {
	created := now.Add(-time.Hour)
	old := func(state crawlv1.CrawlState) *crawlv1.CrawlSpec {
		return &crawlv1.CrawlSpec{CrawlId: "c", State: state, Revision: 3, Name: "old",
			CreatedAt: timestamppb.New(created), Limits: &crawlv1.Limits{MaxPages: 10}}
	}
	tests := []struct {
		name    string
		state   crawlv1.CrawlState
		wantErr error
	}{
		{"running stays running", crawlv1.CrawlState_CRAWL_STATE_RUNNING, nil},
		{"paused stays paused", crawlv1.CrawlState_CRAWL_STATE_PAUSED, nil},
		{"cancelled is final", crawlv1.CrawlState_CRAWL_STATE_CANCELLED, jobs.ErrFinal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prev := old(tt.state)
			spec := &crawlv1.CrawlSpec{CrawlId: "c", State: crawlv1.CrawlState_CRAWL_STATE_RUNNING, Revision: 1, Name: "new",
				CreatedAt: timestamppb.New(now), Limits: &crawlv1.Limits{MaxPages: 20}}
			next, err := jobs.Revise(prev, spec, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if next.GetRevision() != 4 || next.GetState() != tt.state || next.GetName() != "new" || next.GetLimits().GetMaxPages() != 20 ||
				!next.GetCreatedAt().AsTime().Equal(created) || !next.GetUpdatedAt().AsTime().Equal(now) {
				t.Errorf("next %v", next)
			}
			if spec.GetRevision() != 1 || prev.GetRevision() != 3 || prev.GetName() != "old" {
				t.Errorf("arguments modified: %v, %v", spec, prev)
			}
		})
	}
}

func FuzzBuildSeedsText(f *testing.F) {
	f.Add("http://127.0.0.2/\nnope\n")
	f.Fuzz(func(t *testing.T, text string) {
		job, err := jobs.Build(jobs.Request{CrawlID: "f", SeedsText: text, SkipBad: true}, nil, now)
		var fe jobs.FieldErrors
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("error %v is not FieldErrors", err)
		}
		for _, s := range job.Seeds {
			if s.URL == "" {
				t.Error("empty seed")
			}
		}
	})
}

// TestBuildSiteRules: per-site rules reach the spec (hosts and domains in
// lower case), and each problem is reported at its field.
func TestBuildSiteRules(t *testing.T) {
	scope := &jobs.Scope{Sites: []jobs.SiteRules{
		{Hosts: []string{"News.Example.com"}, AllowPatterns: []string{`/2024/`}},
		{Domains: []string{"Blog.example.org"}, DenyPatterns: []string{`/tag/`}},
	}}
	job, err := jobs.BuildSpec(jobs.Request{CrawlID: "c", Scope: scope}, nil, now)
	if err != nil {
		t.Fatalf("BuildSpec: %v", err)
	}
	sites := job.Spec.GetScope().GetSites()
	if len(sites) != 2 || sites[0].GetHosts()[0] != "news.example.com" || sites[0].GetAllowPatterns()[0] != `/2024/` ||
		sites[1].GetDomains()[0] != "blog.example.org" || sites[1].GetDenyPatterns()[0] != `/tag/` {
		t.Errorf("sites %v", sites)
	}

	bad := &jobs.Scope{Sites: []jobs.SiteRules{
		{AllowPatterns: []string{`/x/`}},
		{Hosts: []string{"a.test/path"}, DenyPatterns: []string{"", "("}},
	}}
	_, err = jobs.BuildSpec(jobs.Request{CrawlID: "c", Scope: bad}, nil, now)
	var fe jobs.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want field errors", err)
	}
	var fields []string
	for _, e := range fe {
		fields = append(fields, e.Field)
	}
	want := []string{"scope.sites[0]", "scope.sites[1].hosts[0]", "scope.sites[1].deny_patterns[0]", "scope.sites[1].deny_patterns[1]"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v (%v)", fields, want, err)
	}
}

// TestBuildScopeMode: a crawl without a scope stays on its seeds' sites;
// keywords or allow lists make the web the default; a mode given is kept;
// sitemap entries add their sites; an unknown mode names the field.
func TestBuildScopeMode(t *testing.T) {
	seeds := []string{"http://www.example.co.uk/a", "http://127.0.0.9:8080/"}
	tests := []struct {
		name           string
		req            jobs.Request
		mode           crawlv1.ScopeMode
		hosts, domains []string
	}{
		{"no scope: the seeds' domains", jobs.Request{Seeds: seeds},
			crawlv1.ScopeMode_SCOPE_MODE_DOMAIN, []string{"127.0.0.9:8080"}, []string{"example.co.uk"}},
		{"host", jobs.Request{Seeds: seeds, Scope: &jobs.Scope{Mode: "host"}},
			crawlv1.ScopeMode_SCOPE_MODE_HOST, []string{"127.0.0.9:8080", "www.example.co.uk"}, nil},
		{"web", jobs.Request{Seeds: seeds, Scope: &jobs.Scope{Mode: "web", SameHostOnly: true}},
			crawlv1.ScopeMode_SCOPE_MODE_WEB, nil, nil},
		{"allow list: its own scope", jobs.Request{Seeds: seeds, Scope: &jobs.Scope{AllowDomains: []string{"example.org"}}},
			crawlv1.ScopeMode_SCOPE_MODE_WEB, nil, nil},
		{"keywords: result pages link elsewhere", jobs.Request{Seeds: seeds, Keywords: &jobs.Keywords{Terms: []string{"go"}, Engines: []string{"bing"}}},
			crawlv1.ScopeMode_SCOPE_MODE_WEB, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.CrawlID = "c"
			job, err := jobs.Build(tt.req, nil, now)
			if err != nil {
				t.Fatal(err)
			}
			sc := job.Spec.GetScope()
			if sc.GetMode() != tt.mode || !slices.Equal(sc.GetSeedHosts(), tt.hosts) || !slices.Equal(sc.GetSeedDomains(), tt.domains) {
				t.Errorf("scope mode %v hosts %q domains %q, want %v %q %q", sc.GetMode(), sc.GetSeedHosts(), sc.GetSeedDomains(), tt.mode, tt.hosts, tt.domains)
			}
			if got := jobs.ScopeModeName(sc.GetMode()); tt.req.Scope != nil && tt.req.Scope.Mode != "" && got != tt.req.Scope.Mode {
				t.Errorf("ScopeModeName = %q, want %q", got, tt.req.Scope.Mode)
			}
		})
	}

	job, err := jobs.Build(jobs.Request{CrawlID: "c", Seeds: seeds}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	job.AddSitemapEntries([]jobs.Seed{{URL: "http://cdn.example.org/p"}, {URL: "http://www.example.co.uk/b"}})
	if got := job.Spec.GetScope().GetSeedDomains(); !slices.Equal(got, []string{"example.co.uk", "example.org"}) {
		t.Errorf("after sitemap entries the seed domains are %q, want the sitemap's site added", got)
	}

	_, err = jobs.Build(jobs.Request{CrawlID: "c", Seeds: seeds, Scope: &jobs.Scope{Mode: "planet"}}, nil, now)
	var fe jobs.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "scope.mode" {
		t.Errorf("unknown mode: err = %v, want one error on scope.mode", err)
	}
}

// TestBuildIdentityAndTimeLimit: a crawl's user agent, extra headers and
// time limit reach its spec; every bad one is a field error naming the
// field and what is wrong with it.
func TestBuildIdentityAndTimeLimit(t *testing.T) {
	const ua = "examplebot/1.0 (+https://example.org/bot)"
	seeds := []string{"http://127.0.0.2/"}
	job, err := jobs.Build(jobs.Request{CrawlID: "c", Seeds: seeds,
		Identity: &jobs.Identity{UserAgent: " " + ua + " ", Headers: []string{"accept-language: en, fr;q=0.5", "From:ops@example.org"}},
		Limits:   &jobs.Limits{MaxDuration: "90m"}}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	id := job.Spec.GetIdentity()
	if id.GetUserAgent() != ua || len(id.GetHeaders()) != 2 ||
		id.GetHeaders()[0].GetName() != "Accept-Language" || id.GetHeaders()[0].GetValue() != "en, fr;q=0.5" ||
		id.GetHeaders()[1].GetName() != "From" || id.GetHeaders()[1].GetValue() != "ops@example.org" {
		t.Errorf("identity = %v", id)
	}
	if d := job.Spec.GetLimits().GetMaxDuration().AsDuration(); d != 90*time.Minute {
		t.Errorf("max_duration = %v, want 1h30m", d)
	}
	for _, req := range []jobs.Request{
		{CrawlID: "c", Seeds: seeds, Identity: &jobs.Identity{}, Limits: &jobs.Limits{MaxDuration: "0s"}},
		{CrawlID: "c", Seeds: seeds, Identity: &jobs.Identity{UserAgent: "  "}, Limits: &jobs.Limits{}},
	} {
		job, err := jobs.Build(req, nil, now)
		if err != nil || job.Spec.GetIdentity() != nil || job.Spec.GetLimits().GetMaxDuration() != nil {
			t.Errorf("Build(%+v) = identity %v, time limit %v, %v; want neither", req, job.Spec.GetIdentity(), job.Spec.GetLimits().GetMaxDuration(), err)
		}
	}

	tests := []struct {
		name     string
		identity *jobs.Identity
		limits   *jobs.Limits
		field    string
		message  string // substring
	}{
		{"user agent without product token", &jobs.Identity{UserAgent: "(+https://example.org/bot)"}, nil, "identity.user_agent", "no product token"},
		{"user agent without contact", &jobs.Identity{UserAgent: "examplebot/1.0"}, nil, "identity.user_agent", "no contact"},
		{"browser-like user agent", &jobs.Identity{UserAgent: "Mozilla/5.0 (compatible; examplebot; +https://example.org/)"}, nil, "identity.user_agent", "names browsers"},
		{"user agent with a line break", &jobs.Identity{UserAgent: "examplebot (+https://example.org/)\nX: y"}, nil, "identity.user_agent", "printable ASCII"},
		{"unknown forbidden header", &jobs.Identity{Headers: []string{"From: a@example.org", "Cookie: session=1"}}, nil, "identity.headers[1]", "header Cookie may not be set"},
		{"hop-by-hop header", &jobs.Identity{Headers: []string{"Connection: close"}}, nil, "identity.headers[0]", "header Connection may not be set: a hop-by-hop header"},
		{"host header", &jobs.Identity{Headers: []string{"host: example.org"}}, nil, "identity.headers[0]", "header Host may not be set"},
		{"user agent as a header", &jobs.Identity{Headers: []string{"User-Agent: x"}}, nil, "identity.headers[0]", "identity.user_agent"},
		{"authorization", &jobs.Identity{Headers: []string{"Authorization: Basic eDp5"}}, nil, "identity.headers[0]", "--credentials-file"},
		{"malformed header", &jobs.Identity{Headers: []string{"X-Trace"}}, nil, "identity.headers[0]", `want "Name: value"`},
		{"malformed header name", &jobs.Identity{Headers: []string{"X Trace: 1"}}, nil, "identity.headers[0]", "want a token"},
		{"header value with CR LF", &jobs.Identity{Headers: []string{"X-Trace: 1\r\nHost: evil"}}, nil, "identity.headers[0]", "line break"},
		{"header twice", &jobs.Identity{Headers: []string{"X-A: 1", "x-a: 2"}}, nil, "identity.headers[1]", "header X-A given twice (also identity.headers[0])"},
		{"too many headers", &jobs.Identity{Headers: slices.Repeat([]string{"X-A: 1"}, 21)}, nil, "identity.headers", "21 headers, want at most 20"},
		{"negative duration", nil, &jobs.Limits{MaxDuration: "-5m"}, "limits.max_duration", "-5m0s, want a positive duration"},
		{"duration without unit", nil, &jobs.Limits{MaxDuration: "30"}, "limits.max_duration", `"30" is not a duration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jobs.Build(jobs.Request{CrawlID: "c", Seeds: seeds, Identity: tt.identity, Limits: tt.limits}, nil, now)
			var fe jobs.FieldErrors
			if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != tt.field || !strings.Contains(fe[0].Message, tt.message) {
				t.Fatalf("err = %v, want one error of %s saying %q", err, tt.field, tt.message)
			}
		})
	}
}

// TestBuildPreviousCrawl: previous_crawl_id reaches the spec; an invalid
// id, or the crawl itself, is a field error.
func TestBuildPreviousCrawl(t *testing.T) {
	job, err := jobs.BuildSpec(jobs.Request{CrawlID: "c2", PreviousCrawlID: "c1"}, nil, now)
	if err != nil || job.Spec.GetPreviousCrawlId() != "c1" {
		t.Fatalf("BuildSpec = %v, %v; want previous crawl c1", job.Spec, err)
	}
	for _, tt := range []struct{ name, id, prev string }{
		{"invalid id", "c2", "no spaces"},
		{"too long", "c2", strings.Repeat("a", jobs.MaxCrawlID+1)},
		{"itself", "c2", "c2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := jobs.BuildSpec(jobs.Request{CrawlID: tt.id, PreviousCrawlID: tt.prev}, nil, now)
			var fe jobs.FieldErrors
			if !errors.As(err, &fe) || len(fe) != 1 || fe[0].Field != "previous_crawl_id" {
				t.Errorf("err = %v, want a previous_crawl_id field error", err)
			}
		})
	}
}

// TestBuildPriority: the request's priority rules become the spec's, hosts
// in lower case; every bad rule is a field error naming it, none is
// dropped silently; a priority that sets nothing leaves the spec's unset.
func TestBuildPriority(t *testing.T) {
	req := jobs.Request{CrawlID: "c", Priority: &jobs.Priority{
		Rules: []jobs.PriorityRule{
			{Pattern: `/product/`, Delta: 50},
			{Pattern: `\?sort=`, Delta: -100, Hosts: []string{"Shop.Example"}},
		},
		BreadthFirst: true,
	}}
	job, err := jobs.BuildSpec(req, nil, now)
	if err != nil {
		t.Fatalf("BuildSpec: %v", err)
	}
	p := job.Spec.GetPriority()
	if rs := p.GetRules(); !p.GetBreadthFirst() || len(rs) != 2 || rs[0].GetPattern() != `/product/` || rs[0].GetDelta() != 50 ||
		rs[1].GetDelta() != -100 || !slices.Equal(rs[1].GetHosts(), []string{"shop.example"}) {
		t.Errorf("priority %v", p)
	}

	job, err = jobs.BuildSpec(jobs.Request{CrawlID: "c", Priority: &jobs.Priority{}}, nil, now)
	if err != nil || job.Spec.GetPriority() != nil {
		t.Errorf("empty priority: %v, %v", job.Spec.GetPriority(), err)
	}

	bad := &jobs.Priority{Rules: []jobs.PriorityRule{
		{Pattern: `/ok/`, Delta: 1},
		{Pattern: `(`, Delta: 5},
		{Pattern: `/zero/`, Delta: 0},
		{Pattern: `/big/`, Delta: 1001},
		{Pattern: ``, Delta: 3},
		{Pattern: `/h/`, Delta: 3, Hosts: []string{"a.test/path"}},
	}}
	_, err = jobs.BuildSpec(jobs.Request{CrawlID: "c", Priority: bad}, nil, now)
	var fe jobs.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want field errors", err)
	}
	var fields []string
	for _, e := range fe {
		fields = append(fields, e.Field)
	}
	want := []string{"priority.rules[1]", "priority.rules[2]", "priority.rules[3]", "priority.rules[4]", "priority.rules[5]"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v (%v)", fields, want, err)
	}
	for _, w := range []string{"missing closing )", "delta 0 changes nothing", "delta 1001 not in [-1000, 1000]", "empty pattern", `host "a.test/path"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

// TestBuildExtractAndDocuments: a request's extraction rules become the
// spec's and read back as they were written; a broken selector is a field
// error naming extract; documents' short names expand to media types, an
// unknown type is refused.
func TestBuildExtractAndDocuments(t *testing.T) {
	x := &jobs.Extraction{Rules: []jobs.ExtractRule{{
		Name: "product", Pattern: `/product/`, Hosts: []string{"Shop.Test"},
		Fields: []jobs.ExtractField{
			{Name: "name", CSS: "h1"},
			{Name: "price", CSS: ".price", Type: "Number"},
			{Name: "images", XPath: "//img/@src", Type: "url", List: true},
		},
	}}}
	job, err := jobs.BuildSpec(jobs.Request{CrawlID: "c", Extract: x, Documents: &jobs.Documents{ContentTypes: []string{"pdf", "docx"}}}, nil, now)
	if err != nil {
		t.Fatalf("BuildSpec: %v", err)
	}
	r := job.Spec.GetExtract().GetRules()
	if len(r) != 1 || r[0].GetHosts()[0] != "shop.test" || r[0].GetFields()[1].GetType() != "number" || r[0].GetFields()[2].GetXpath() != "//img/@src" {
		t.Errorf("extract %v", job.Spec.GetExtract())
	}
	back := jobs.ExtractionRequest(job.Spec.GetExtract())
	if len(back.Rules) != 1 || len(back.Rules[0].Fields) != 3 || back.Rules[0].Fields[2] != x.Rules[0].Fields[2] {
		t.Errorf("ExtractionRequest = %+v", back)
	}
	if got := job.Spec.GetDocuments().GetContentTypes(); !slices.Equal(got, []string{doctypes.PDF, doctypes.DOCX}) {
		t.Errorf("documents %v, want pdf and docx media types", got)
	}

	bad := &jobs.Extraction{Rules: []jobs.ExtractRule{{Name: "p", Fields: []jobs.ExtractField{{Name: "n", CSS: "h1[["}}}}}
	_, err = jobs.BuildSpec(jobs.Request{CrawlID: "c", Extract: bad, Documents: &jobs.Documents{ContentTypes: []string{"image/png"}}}, nil, now)
	var fe jobs.FieldErrors
	if !errors.As(err, &fe) || len(fe) != 2 || fe[0].Field != "extract" || fe[1].Field != "documents.content_types" {
		t.Fatalf("err = %v, want field errors for extract and documents.content_types", err)
	}
	if !strings.Contains(err.Error(), `css "h1[["`) || !strings.Contains(err.Error(), "image/png") {
		t.Errorf("err = %v, want it to name the selector and the type", err)
	}
}

// TestBuildRender: a request's render setting becomes the spec's (modes by
// name, sites' hosts lower-cased, other_hosts); an empty one sets
// nothing; unknown modes, sites without hosts or mode and hosts that are
// URLs are field errors naming their entry.
func TestBuildRender(t *testing.T) {
	req := jobs.Request{CrawlID: "c", Render: &jobs.Render{Mode: "auto", OtherHosts: true, Sites: []jobs.RenderSite{
		{Hosts: []string{"App.Example", "shop.example:8080"}, Mode: "always"},
		{Hosts: []string{"docs.example"}, Mode: "never"},
	}}}
	job, err := jobs.BuildSpec(req, nil, now)
	if err != nil {
		t.Fatalf("BuildSpec: %v", err)
	}
	r := job.Spec.GetRender()
	if r.GetMode() != crawlv1.RenderMode_RENDER_MODE_AUTO || !r.GetOtherHosts() || len(r.GetSites()) != 2 ||
		!slices.Equal(r.GetSites()[0].GetHosts(), []string{"app.example", "shop.example:8080"}) ||
		r.GetSites()[0].GetMode() != crawlv1.RenderMode_RENDER_MODE_ALWAYS || r.GetSites()[1].GetMode() != crawlv1.RenderMode_RENDER_MODE_NEVER {
		t.Errorf("render %v", r)
	}
	for _, m := range []string{"never", "auto", "always"} {
		job, err := jobs.BuildSpec(jobs.Request{CrawlID: "c", Render: &jobs.Render{Mode: m}}, nil, now)
		if err != nil || jobs.RenderModeName(job.Spec.GetRender().GetMode()) != m {
			t.Errorf("mode %q: %v, %v", m, job.Spec.GetRender(), err)
		}
	}
	if job, err := jobs.BuildSpec(jobs.Request{CrawlID: "c", Render: &jobs.Render{}}, nil, now); err != nil || job.Spec.GetRender() != nil {
		t.Errorf("empty render: %v, %v", job.Spec.GetRender(), err)
	}

	bad := &jobs.Render{Mode: "sometimes", Sites: []jobs.RenderSite{
		{Hosts: []string{"ok.example"}, Mode: "auto"},
		{Mode: "always"},
		{Hosts: []string{"http://a.example/x"}, Mode: "auto"},
		{Hosts: []string{"b.example"}},
		{Hosts: []string{"c.example"}, Mode: "often"},
	}}
	_, err = jobs.BuildSpec(jobs.Request{CrawlID: "c", Render: bad}, nil, now)
	var fe jobs.FieldErrors
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want field errors", err)
	}
	var fields []string
	for _, e := range fe {
		fields = append(fields, e.Field)
	}
	want := []string{"render.mode", "render.sites[1].hosts", "render.sites[2].hosts[0]", "render.sites[3].mode", "render.sites[4].mode"}
	if !slices.Equal(fields, want) {
		t.Errorf("fields %v, want %v (%v)", fields, want, err)
	}
	for _, w := range []string{`"sometimes"`, "no hosts", `"often"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}
