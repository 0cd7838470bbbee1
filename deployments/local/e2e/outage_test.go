package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
)

// outage is what one ClickHouse outage did to the crawl.
type outage struct {
	name     string
	down     time.Duration // stopped until restarted
	requests int           // requests the web received while it was down
	// notReady and waiting are the services whose /readyz answered 503,
	// and whose dependency_waiting{dependency="clickhouse"} gauge read 1,
	// while it was down.
	notReady, waiting map[string]bool
	// resume is the time from the server's return to the next new page
	// fetched; ready the time until every service was ready again.
	resume, ready time.Duration
	// doneWhileDown: every page was fetched before the server returned
	// (nothing was left to resume).
	doneWhileDown bool
}

// chServices are the services that use ClickHouse, by process name.
var chServices = []string{"scheduler", "fetcher-0", "parser"}

// dependency is a server of the crawl a test stops and starts again.
type dependency struct {
	name  string // as the services' dependency_waiting gauge names it
	stop  func() error
	start func(ctx context.Context) error
}

// clickhouse is the test's own ClickHouse (webEnvConfig.ownClickHouse),
// started again on the same ports and data.
func (e *webEnv) clickhouse() dependency {
	return dependency{name: "clickhouse", stop: e.ch.Stop, start: e.ch.Restart}
}

// kafka is the test's own broker (webEnvConfig.ownBroker), started again
// on the same address and data.
func (e *webEnv) kafka() dependency {
	return dependency{
		name: "kafka",
		stop: func() error {
			e.broker.Close()
			e.broker = nil
			return nil
		},
		start: func(ctx context.Context) error {
			e.startBrokerAgain(ctx)
			return nil
		},
	}
}

// dependencyOutage stops dep, keeps it down for down (watching the
// services meanwhile), starts it again, and measures how long the crawl
// takes to resume. restarts > 1 is a rolling restart: the server
// restarted that many times in a row.
func (e *webEnv) dependencyOutage(ctx context.Context, dep dependency, name string, down time.Duration, restarts int) outage {
	e.t.Helper()
	o := outage{name: name, notReady: map[string]bool{}, waiting: map[string]bool{}}
	before := e.web.Stats().Requests
	stopped := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := range restarts {
		if err := dep.stop(); err != nil {
			e.t.Fatalf("stop %s: %v", dep.name, err)
		}
		for end := time.Now().Add(down); time.Now().Before(end); {
			e.watchServices(&o, dep.name)
			select {
			case <-ctx.Done():
				e.t.Fatalf("%s down (%s, stop %d): %v", dep.name, name, i+1, ctx.Err())
			case <-tick.C:
			}
		}
		e.watchServices(&o, dep.name)
		if err := dep.start(ctx); err != nil {
			e.t.Fatalf("restart %s: %v", dep.name, err)
		}
	}
	back := time.Now()
	o.down = back.Sub(stopped)
	o.requests = e.web.Stats().Requests - before
	pages := e.web.Stats().Pages
	for o.resume == 0 || o.ready == 0 {
		if err := e.p.Check(); err != nil {
			e.t.Fatal(err)
		}
		if st := e.web.Stats(); o.resume == 0 && (st.Pages > pages || st.Pages == st.PagesTotal) {
			o.resume = time.Since(back)
			o.doneWhileDown = pages == st.PagesTotal
		}
		if o.ready == 0 && e.allReady() {
			o.ready = time.Since(back)
		}
		select {
		case <-ctx.Done():
			e.t.Fatalf("after %s: resumed after %s, ready after %s: %v", name, o.resume, o.ready, ctx.Err())
		case <-tick.C:
		}
	}
	return o
}

// watchServices records which services say, while dep is down, that they
// are not ready and that they wait for it; every one must still run.
func (e *webEnv) watchServices(o *outage, dep string) {
	e.t.Helper()
	for _, name := range chServices {
		proc := e.p.Process(name)
		if !proc.Running() {
			e.t.Errorf("%s is not running during the %s outage: %v", name, dep, proc.ExitError())
			continue
		}
		addr := e.p.AdminAddr(proc)
		if status(e.t, "http://"+addr+"/readyz") == http.StatusServiceUnavailable {
			o.notReady[name] = true
		}
		service, _, _ := strings.Cut(name, "-")
		if gaugeValue(e.t, addr, "crawler_"+service+`_dependency_waiting{dependency="`+dep+`"}`) == 1 {
			o.waiting[name] = true
		}
	}
}

// allReady reports whether every service that uses ClickHouse answers
// /readyz with 200 again.
func (e *webEnv) allReady() bool {
	for _, name := range chServices {
		if status(e.t, "http://"+e.p.AdminAddr(e.p.Process(name))+"/readyz") != http.StatusOK {
			return false
		}
	}
	return true
}

// status returns the status of a GET of url, 0 when it cannot be had.
func status(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// minGapPerWebHost returns the shortest time between the answer to one
// request of a host of the generated web and the next request of it
// (websim.Gap; robots.txt excluded), and the host.
func minGapPerWebHost(web *websim.Web) (time.Duration, string) {
	byHost := map[string][]websim.Hit{}
	for _, r := range web.Resources() {
		host, _, _ := strings.Cut(r.ID, " ")
		byHost[host] = append(byHost[host], r.Hits...)
	}
	gap, where := time.Duration(1<<62), ""
	for host, hits := range byHost {
		slices.SortFunc(hits, func(a, b websim.Hit) int { return a.Arrived.Compare(b.Arrived) })
		for i := 1; i < len(hits); i++ {
			if d := websim.Gap(hits[i-1], hits[i]); d < gap {
				gap, where = d, host
			}
		}
	}
	return gap, where
}

// startOutageEnv starts a crawl of a generated web (about 2 100 pages,
// 40 s of crawling, at the addresses 127.1.<octet>.x) on the test's own
// ClickHouse and broker, under the launcher's supervision (its default
// restart policy).
func startOutageEnv(t *testing.T, ctx context.Context, octet int) *webEnv {
	t.Helper()
	return startOutageEnvOn(t, ctx, octet, "")
}

// startOutageEnvOn is startOutageEnv with the broker's and ClickHouse's
// data on volume (webEnvConfig.volume; "": the test's data dir).
func startOutageEnvOn(t *testing.T, ctx context.Context, octet int, volume string) *webEnv {
	t.Helper()
	e := startWebEnv(t, ctx, webEnvConfig{
		web: websim.Config{
			Hosts: faultHosts, Articles: 250, FirstAddr: netip.MustParseAddr(fmt.Sprintf("127.1.%d.1", octet)), Seed: uint64(octet),
			GBKEvery: 5, TrapEvery: 4, BigEvery: -1, SlowEvery: -1,
		},
		delay:         e2eDelay,
		args:          webArgs,
		ownClickHouse: true,
		ownBroker:     true,
		autoRestart:   true,
		volume:        volume,
	})
	e.seedScoped(ctx, webScope{AllowHosts: e.hostNames(), MaxDepth: faultDepth})
	return e
}

// checkOutages drains the crawl after its outages of dep, prints what
// each did, and checks that no service exited, that each said it waited
// (and, for ClickHouse, that it was not ready), and that the crawl lost
// nothing, repeated nothing beyond the faults' allowance and kept the
// delay.
func checkOutages(t *testing.T, ctx context.Context, e *webEnv, dep string, outages []outage) {
	t.Helper()
	s := e.drain(ctx, 100*time.Second)
	e.stop()
	c := costOf(e.web)
	st := c.Stats
	t.Logf("crawl drained: %s", s.Line())

	var b strings.Builder
	fmt.Fprintf(&b, "%-26s | %7s | %19s | %14s | %15s | %s\n", dep+" outage", "down", "requests while down", "time to resume", "all ready again", "services not ready / waiting")
	for _, o := range outages {
		resume := o.resume.Round(10 * time.Millisecond).String()
		if o.doneWhileDown {
			resume = "(all fetched)"
		}
		fmt.Fprintf(&b, "%-26s | %7s | %19d | %14s | %15s | %d / %d of %d\n", o.name, o.down.Round(100*time.Millisecond), o.requests,
			resume, o.ready.Round(10*time.Millisecond), len(o.notReady), len(o.waiting), len(chServices))
	}
	fmt.Fprintf(&b, "site: %d requests, pages %d/%d, extra requests %d, retries %d\n", st.Requests, st.Pages, st.PagesTotal, c.extra(), st.Retries)
	t.Logf("%s outages:\n%s", dep, b.String())
	fmt.Print("e2e: " + dep + " outages (launcher supervision):\n" + b.String())

	if ev := e.supervisorEvents(); len(ev) > 0 {
		t.Errorf("services exited during the outages: %v", ev)
	}
	for _, o := range outages {
		if dep == "clickhouse" {
			for _, name := range chServices {
				if !o.notReady[name] {
					t.Errorf("%s: %s never answered /readyz 503 while ClickHouse was down", o.name, name)
				}
			}
		}
		if len(o.waiting) == 0 {
			t.Errorf("%s: no service's dependency_waiting gauge said it waited for %s", o.name, dep)
		}
	}
	if st.Pages != st.PagesTotal {
		t.Errorf("fetched %d of %d content pages, want all; never requested: %v", st.Pages, st.PagesTotal,
			e.explainMissing(ctx, first(missingPages(e.web), 10)))
	}
	if lost := e.unfetched(ctx); len(lost) > 0 {
		t.Errorf("%d admitted URLs never fetched: %v", len(lost), first(lost, 10))
	}
	if st.Offsite != 0 || st.Disallowed != 0 {
		t.Errorf("%d requests outside the scope and %d under a Disallow, want 0", st.Offsite, st.Disallowed)
	}
	if share := float64(c.extra()) / float64(st.Requests); share > maxFaultCost {
		t.Errorf("the outages cost %d extra requests of %d (%.2f%%), want at most %.1f%%; repeated: %v",
			c.extra(), st.Requests, 100*share, 100*maxFaultCost, first(c.Repeated, 10))
	}
	if c.MaxHits > maxAttempts {
		t.Errorf("%s requested %d times, more than --max-attempts %d", c.MaxHitsOf, c.MaxHits, maxAttempts)
	}
	if gap, host := minGapPerWebHost(e.web); gap < e2eDelay-jitter {
		t.Errorf("host %s was requested twice within %s, want at least the delay %s", host, gap, e2eDelay)
	}
}

// TestClickHouseOutages crawls a generated web under the launcher's own
// supervision (its default restart policy) while ClickHouse goes away:
// stopped for 20 s at about 30% of the pages, then restarted twice in a
// row (a rolling restart) at about 60%. No service may exit: each waits,
// says so (readiness 503, the dependency_waiting gauge) and resumes by
// itself. The crawl must drain with every page fetched, every admitted URL
// fetched, at most the requests in flight as extra requests, and the
// politeness delay kept; the time to resume is printed.
func TestClickHouseOutages(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	e := startOutageEnv(t, ctx, 65)
	var outages []outage
	e.waitPages(ctx, e.web.Pages()*3/10)
	outages = append(outages, e.dependencyOutage(ctx, e.clickhouse(), "stopped 20 s", 20*time.Second, 1))
	e.waitPages(ctx, e.web.Pages()*6/10)
	outages = append(outages, e.dependencyOutage(ctx, e.clickhouse(), "rolling restart (2×)", time.Second, 2))
	checkOutages(t, ctx, e, "clickhouse", outages)
}

// longOutagesEnv names the environment variable that runs
// TestLongOutages: the longest outage to run ("2m" runs the 2-minute
// ones, "10m" all). They take 3 to 11 minutes each, beyond what CI runs.
const longOutagesEnv = "CRAWLER_E2E_LONG_OUTAGES"

// TestLongOutages is TestClickHouseOutages for longer outages, one crawl
// each: ClickHouse stopped for 2 and for 10 minutes, the broker for 2
// minutes, each at about 30% of the pages. Opt-in (longOutagesEnv).
func TestLongOutages(t *testing.T) {
	limit, err := time.ParseDuration(os.Getenv(longOutagesEnv))
	if err != nil {
		t.Skipf("set %s=2m (or 10m) to run outages up to that long (%v)", longOutagesEnv, err)
	}
	for _, tt := range []struct {
		name  string
		octet int
		dep   string
		down  time.Duration
	}{
		{"clickhouse_2m", 66, "clickhouse", 2 * time.Minute},
		{"kafka_2m", 67, "kafka", 2 * time.Minute},
		{"clickhouse_10m", 68, "clickhouse", 10 * time.Minute},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.down > limit {
				t.Skipf("longer than %s=%s", longOutagesEnv, limit)
			}
			ctx, cancel := context.WithTimeout(t.Context(), tt.down+5*time.Minute)
			defer cancel()
			e := startOutageEnv(t, ctx, tt.octet)
			dep := e.clickhouse()
			if tt.dep == "kafka" {
				dep = e.kafka()
			}
			e.waitPages(ctx, e.web.Pages()*3/10)
			o := e.dependencyOutage(ctx, dep, "stopped "+tt.down.String(), tt.down, 1)
			checkOutages(t, ctx, e, tt.dep, []outage{o})
		})
	}
}
