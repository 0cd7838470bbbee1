//go:build linux && (amd64 || arm64)

package multihost_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/websim"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// faultWeb is the web of the fault scenarios: 100 hosts of 30 articles,
// about 40 requests each, so that a polite crawl lasts 40-50 s and a fault
// lands in the middle of it.
var faultWeb = webConfig{Hosts: 100, Articles: 30, MinLinks: 4, MaxLinks: 8}

// faultEnv is the tuning of the fault scenarios: retries of the web's 500
// after 500 ms rather than 5 s, so that the crawl's tail is short.
var faultEnv = []string{"CRAWLER_RETRY_BACKOFF=500ms"}

// union returns the sorted union of the partitions of the given hosts.
func union(owned map[string][]int, hosts ...string) []int {
	var out []int
	for _, h := range hosts {
		out = append(out, owned[h]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// allPartitions reports whether p holds every partition 0..n-1.
func allPartitions(p []int, n int) bool {
	if len(p) != n {
		return false
	}
	for i, x := range p {
		if x != i {
			return false
		}
	}
	return true
}

// subset reports whether every element of a is in b.
func subset(a, b []int) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// hostsOf returns the web's host indexes (as in websim resource IDs) whose
// politeness key falls in one of the partitions.
func (c *crawl) hostsOf(partitions []int) map[string]bool {
	c.t.Helper()
	out := map[string]bool{}
	for i, h := range c.ready.Hosts {
		key, err := kafkaio.Key("http://" + h + "/")
		if err != nil {
			c.t.Fatal(err)
		}
		if slices.Contains(partitions, kafkaio.PartitionFor(key, c.kafka.Partitions)) {
			out[strconv.Itoa(i)] = true
		}
	}
	return out
}

// partitionOfHost returns the partition of a web host index.
func (c *crawl) partitionOfHost(idx string) int {
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= len(c.ready.Hosts) {
		return -1
	}
	key, err := kafkaio.Key("http://" + c.ready.Hosts[i] + "/")
	if err != nil {
		return -1
	}
	return kafkaio.PartitionFor(key, c.kafka.Partitions)
}

// answeredBetween counts the requests the web answered to the given hosts
// in [from, to).
func answeredBetween(res []websim.Resource, hosts map[string]bool, from, to time.Time) int {
	n := 0
	for _, r := range res {
		h, _, _ := strings.Cut(r.ID, " ")
		if !hosts[h] {
			continue
		}
		for _, hit := range r.Hits {
			if !hit.At.Before(from) && hit.At.Before(to) {
				n++
			}
		}
	}
	return n
}

// stableAssignment waits until the service's instances on the given hosts
// hold every partition of its group between them, in one generation, and
// returns who holds what.
func (c *crawl) stableAssignment(ctx context.Context, service string, timeout time.Duration, hosts ...string) (map[string][]int, bool) {
	var owned map[string][]int
	ok := waitFor(ctx, timeout, func() bool {
		owned = c.owned(service)
		gen := -1
		for _, s := range c.svcs {
			if s.service != service || !slices.Contains(hosts, s.host.name) {
				continue
			}
			a := c.assignments(s)
			if len(a) == 0 {
				return false
			}
			if gen >= 0 && a[len(a)-1].Generation != gen {
				return false
			}
			gen = a[len(a)-1].Generation
		}
		return allPartitions(union(owned, hosts...), c.kafka.Partitions)
	})
	return owned, ok
}

// generations returns the latest generation of every fetcher's log.
func (c *crawl) generations() map[string]int {
	out := map[string]int{}
	for _, s := range c.svcs {
		if s.service == "fetcher" {
			if a := c.assignments(s); len(a) > 0 {
				out[s.host.name] = a[len(a)-1].Generation
			}
		}
	}
	return out
}

// cut sets host h's link down for d, then up again; the link is brought
// back by the test's cleanup too.
func cut(ctx context.Context, t *testing.T, h host, d time.Duration) {
	t.Helper()
	if err := setLink(ctx, h, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setLink(context.WithoutCancel(t.Context()), h, true) })
	select {
	case <-ctx.Done():
		t.Fatalf("cut %s: %v", h.name, ctx.Err())
	case <-time.After(d):
	}
	if err := setLink(ctx, h, true); err != nil {
		t.Fatal(err)
	}
}

// TestCrawlerHostCutOff cuts the second crawler host off (its link down)
// twice in one crawl of 100 hosts on three crawler hosts: first for 2 s,
// less than the consumer group's session timeout (6 s in the guide's
// cluster.env), then for 15 s, more than it. The short cut moves nothing
// and the host catches up; the long one moves its partitions to the other
// two, and when it comes back it takes back a third of them, only from
// what the others took over. Across both, every page is fetched, the web
// sees no politeness violation (any is printed with its time against the
// host's return), and duplicate requests are at most what the cut host
// had in flight (its hosts' requests in the 5 s before the cut).
func TestCrawlerHostCutOff(t *testing.T) {
	c := startCrawl(t, crawlConfig{crawlers: 3, web: faultWeb, env: faultEnv})
	ctx := t.Context()
	cutHost := crawlers[1]
	before, ok := c.stableAssignment(ctx, "fetcher", 30*time.Second, "c1", "c2", "c3")
	if !ok {
		t.Fatalf("the three fetchers never shared the partitions: %v", c.owned("fetcher"))
	}
	t.Logf("partitions before: %v", before)
	total := c.ready.Pages

	// Short: 2 s, under the session timeout.
	c.waitPages(ctx, total/5)
	gens := c.generations()
	shortAt := time.Now()
	cut(ctx, t, cutHost, 2*time.Second)
	// Nothing moves: no fetcher joins a new generation in the session
	// timeout and a heartbeat after the cut.
	moved := waitFor(ctx, c.kafka.SessionTimeout+2*time.Second, func() bool {
		return !maps(c.generations(), gens)
	})
	if moved {
		t.Errorf("a 2 s cut moved partitions: generations %v -> %v, owners %v", gens, c.generations(), c.owned("fetcher"))
	}
	reqBefore := c.webStats(ctx).Requests
	if !waitFor(ctx, 20*time.Second, func() bool { return c.webStats(ctx).Requests > reqBefore }) {
		t.Errorf("no request for 20 s after the short cut")
	}
	t.Logf("short cut (2 s at %s): generations %v -> %v (nothing moved: %t)",
		shortAt.Format("15:04:05.000"), gens, c.generations(), !moved)

	// Long: 15 s, over the session timeout.
	c.waitPages(ctx, total*2/5)
	cutAt := time.Now()
	if err := setLink(ctx, cutHost, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setLink(context.WithoutCancel(t.Context()), cutHost, true) })
	during, ok := c.stableAssignment(ctx, "fetcher", 30*time.Second, "c1", "c3")
	movedIn := time.Since(cutAt)
	if !ok {
		t.Errorf("c2's partitions did not move to c1 and c3 within 30 s: %v", c.owned("fetcher"))
	}
	// The cut host's fetcher, asked from its own host, is not ready.
	code, body := readyzIn(ctx, cutHost, c.service(cutHost, "fetcher"))
	t.Logf("c2's fetcher /readyz during the cut, asked on c2: %d %s", code, first(body, 300))
	if code != http.StatusServiceUnavailable {
		t.Errorf("c2's fetcher answered /readyz %d during the cut, want 503: %s", code, body)
	}
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(cutAt.Add(15 * time.Second))):
	}
	if err := setLink(ctx, cutHost, true); err != nil {
		t.Fatal(err)
	}
	backAt := time.Now()
	after, ok := c.stableAssignment(ctx, "fetcher", 60*time.Second, "c1", "c2", "c3")
	rejoinedIn := time.Since(backAt)
	if !ok || len(after["c2"]) == 0 {
		t.Errorf("c2 did not take partitions back within 60 s of its return: %v", c.owned("fetcher"))
	}
	t.Logf("long cut (15 s): partitions moved in %s: %v; c2 back in %s: %v",
		movedIn.Round(100*time.Millisecond), during, rejoinedIn.Round(100*time.Millisecond), after)
	share := c.kafka.Partitions / len(crawlers)
	if len(after["c2"]) != share {
		t.Errorf("c2 took back %d partitions, want its share %d: %v", len(after["c2"]), share, after)
	}
	for _, h := range []string{"c1", "c3"} {
		if !subset(after[h], during[h]) {
			t.Errorf("%s was reshuffled when c2 came back: held %v during the cut, %v after", h, during[h], after[h])
		}
	}

	// The cut host says which peer it could not reach.
	fetcher := c.service(cutHost, "fetcher")
	var named []string
	for _, peer := range []string{storeHost.addr} {
		for _, svc := range []string{"fetcher", "scheduler", "parser"} {
			if lines := logLines(c.service(cutHost, svc), peer, `"level":"warn"`); len(lines) > 0 {
				named = append(named, svc+": "+first(lines[0], 300))
			}
		}
	}
	if len(named) == 0 {
		t.Errorf("no warning on %s names the store host %s it could not reach:\n%s", cutHost.name, storeHost.addr, fetcher.proc.LogTail(20))
	} else {
		t.Logf("the cut host's warnings name the store:\n  %s", strings.Join(named, "\n  "))
	}

	c.drain(ctx, 3*time.Minute)
	o := c.outcome(ctx)
	c.stop()
	cutHosts := c.hostsOf(before["c2"])
	res := c.webResources(ctx)
	inflight := answeredBetween(res, cutHosts, cutAt.Add(-5*time.Second), cutAt)
	// Not yet durable at the cut: what was answered in the last
	// politeness delay and commit interval before it.
	undurable := answeredBetween(res, cutHosts, cutAt.Add(-labDelay-kafkaio.DefaultCommitInterval), cutAt)
	t.Logf("crawl: %d requests, %d pages of %d, %d duplicates (bound: %d requests to c2's %d hosts in the 5 s before the cut, %d in the last %s), %d robots.txt again, %d politeness violations (closest %s), window %s",
		o.Stats.Requests, o.Stats.Pages, o.Stats.PagesTotal, o.Stats.Duplicates, inflight, len(cutHosts),
		undurable, labDelay+kafkaio.DefaultCommitInterval, o.Stats.RobotsMore,
		o.Violations, o.MinGap.Round(time.Millisecond), o.Window.Round(100*time.Millisecond))
	for i, p := range o.Close {
		if i == 20 {
			t.Logf("… %d more", len(o.Close)-i)
			break
		}
		t.Logf("too close (times from c2's return; the cut began %.1fs before it): partition %d, %s",
			backAt.Sub(cutAt).Seconds(), c.partitionOfHost(p.Host), p.String(backAt))
	}
	// Until f6fc586 the cut fetcher went on with its former hosts'
	// requests, and what its connections held reached the web when the
	// link came back, close to the new owners' requests (56-64 violations
	// per run): a fetcher now requests only under its group lease.
	// What may be requested again: the requests the web answered whose
	// results were not yet durable at the cut, at most 0.5 % of the crawl.
	// A host's requests are a delay apart and its offsets are committed
	// every commit interval, so that is what the cut host's hosts were
	// answered in the last delay and interval; in a crawl this small that
	// can be more than 0.5 % (CI, 1 Dec 2026: 40 repeats of 4 899
	// requests for c2's 39 hosts, those listed all answered in the same
	// 6 ms just before the cut).
	c.checkComplete(o, min(inflight, max(repeatBound(o), undurable)), 0)
}

// lastLine returns the last log line of the named service that says why it
// stopped (its "stopped" line with an error).
func lastLine(c *crawl, name string) string {
	for _, s := range c.svcs {
		if s.proc.Name() == name {
			if l := logLines(s, `stopped"`, `"error"`); len(l) > 0 {
				return l[len(l)-1]
			}
		}
	}
	return ""
}

// maps reports whether two generation maps are equal.
func maps(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func first(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestStoreHostUnreachable cuts the store host (broker and ClickHouse)
// off for 30 s a third into a crawl on three crawler hosts. No service
// exits, they say which peer they cannot reach, their /readyz turns 503,
// nothing is lost, and fetching resumes by itself once the store is back.
func TestStoreHostUnreachable(t *testing.T) {
	// No service may exit (until 751c5c7 every one did, 20-25 s into the
	// outage: a dial timeout was taken for the caller's deadline).
	c := startCrawl(t, crawlConfig{crawlers: 3, web: faultWeb, env: faultEnv})
	ctx := t.Context()
	c.waitPages(ctx, c.ready.Pages/3)
	cutAt := time.Now()
	if err := setLink(ctx, storeHost, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setLink(context.WithoutCancel(t.Context()), storeHost, true) })
	// Readiness: the first crawler host's services answer 503 while
	// they wait for the store.
	unready := map[string]string{}
	waitFor(ctx, 30*time.Second, func() bool {
		for _, s := range c.svcs {
			if s.host != crawlers[0] {
				continue
			}
			if code, body := readyz(ctx, s); code == http.StatusServiceUnavailable && unready[s.service] == "" {
				unready[s.service] = fmt.Sprintf("%s after %s: %s", s.service, time.Since(cutAt).Round(100*time.Millisecond), first(body, 160))
			}
		}
		return len(unready) >= 3
	})
	select {
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	case <-time.After(time.Until(cutAt.Add(30 * time.Second))):
	}
	duringCut := c.webStats(ctx).Requests
	if err := setLink(ctx, storeHost, true); err != nil {
		t.Fatal(err)
	}
	backAt := time.Now()
	resumed := waitFor(ctx, 60*time.Second, func() bool { return c.webStats(ctx).Requests > duringCut+50 })
	resumedIn := time.Since(backAt)
	if !resumed {
		t.Errorf("fetching did not resume within 60 s of the store's return")
	}
	if len(unready) == 0 {
		t.Errorf("no service on c1 answered /readyz 503 while the store was unreachable")
	}
	var lines []string
	for _, s := range c.svcs {
		if s.host != crawlers[0] {
			continue
		}
		if l := logLines(s, storeHost.addr, `"level":"warn"`); len(l) > 0 {
			lines = append(lines, s.service+": "+first(l[0], 300))
		}
	}
	if len(lines) == 0 {
		t.Errorf("no warning on c1 names the store host %s", storeHost.addr)
	}
	c.drain(ctx, 3*time.Minute)
	o := c.outcome(ctx)
	c.stop()
	res := c.webResources(ctx)
	all := map[string]bool{}
	for i := range c.ready.Hosts {
		all[strconv.Itoa(i)] = true
	}
	during := answeredBetween(res, all, cutAt, backAt)
	t.Logf("store cut off 30 s at %d pages: %d requests answered meanwhile (the fetchers' held work), fetching resumed %s after the store's return",
		c.ready.Pages/3, during, resumedIn.Round(100*time.Millisecond))
	t.Logf("readiness while cut off: %v", unready)
	t.Logf("warnings naming the store:\n  %s", strings.Join(lines, "\n  "))
	t.Logf("crawl: %d requests, %d pages of %d, %d duplicates, %d robots.txt again, %d politeness violations (closest %s), window %s",
		o.Stats.Requests, o.Stats.Pages, o.Stats.PagesTotal, o.Stats.Duplicates, o.Stats.RobotsMore,
		o.Violations, o.MinGap.Round(time.Millisecond), o.Window.Round(100*time.Millisecond))
	if r := c.restarts(); len(r) > 0 {
		var b strings.Builder
		for _, ev := range r {
			fmt.Fprintf(&b, "\n  %s: %s", ev.Name, first(lastLine(c, ev.Name), 400))
		}
		t.Logf("%d service restarts while the store was unreachable (a service should wait, not exit):%s", len(r), b.String())
	}
	// Work fetched during the cut waits in the fetchers' recorders until
	// the store is back. Until this bound, it was fetched again after the
	// cut (100-262 repeats alone, 579 for 400 requests made during the
	// cut under make test's load: the members rejoined one by one and
	// each passing generation redid it); now a fetcher keeps the attempts
	// its recorder holds, and holds its partitions back until the group
	// has settled after the coordinator's silence (kafkaio
	// SettleAfterLapse), so that each gets its own partitions back.
	c.checkComplete(o, repeatBound(o), tolerate(2))
}
