package decide

import (
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

func TestTurn(t *testing.T) {
	fresh := Robots{Fresh: true, FetchedAt: t0}
	cases := []struct {
		name   string
		state  crawlv1.CrawlState
		robots Robots
		spent  bool
		want   Step
	}{
		{"cancelled", cancelled, fresh, true, Cancelled},
		{"paused", paused, Robots{}, true, Paused},
		{"robots.txt known: the page", running, fresh, true, TakePage},
		{"robots.txt due", running, Robots{}, false, FetchRobots},
		{"robots.txt due, budget spent: nothing asked of the host", running, Robots{}, true, Refused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Turn(TurnInput{State: c.state, Robots: func() Robots { return c.robots }, Spent: func() bool { return c.spent }})
			if got != c.want {
				t.Fatalf("Turn = %v, want %v", got, c.want)
			}
		})
	}
}

func TestTurnAsksOnlyWhatItNeeds(t *testing.T) {
	for _, c := range []struct {
		state                 crawlv1.CrawlState
		fresh                 bool
		wantRobots, wantSpent bool
	}{
		{cancelled, false, false, false},
		{paused, false, false, false},
		{running, true, true, false},
		{running, false, true, true},
	} {
		var robots, spent bool
		Turn(TurnInput{State: c.state,
			Robots: func() Robots { robots = true; return Robots{Fresh: c.fresh} },
			Spent:  func() bool { spent = true; return false }})
		if robots != c.wantRobots || spent != c.wantSpent {
			t.Errorf("state %v fresh %v: asked robots %v budget %v, want %v %v", c.state, c.fresh, robots, spent, c.wantRobots, c.wantSpent)
		}
	}
}

func TestRobotsDue(t *testing.T) {
	due := t0.Add(time.Minute)
	cases := []struct {
		name      string
		r         Robots
		attempt   uint32
		notBefore time.Time
		want      bool
	}{
		{"not cached", Robots{}, 0, time.Time{}, true},
		{"cached", Robots{Fresh: true, FetchedAt: t0}, 0, time.Time{}, false},
		{"cached unavailable, first attempt", Robots{Fresh: true, Unavailable: true, FetchedAt: t0}, 0, due, false},
		{"retry of an unavailable robots.txt, asked before it was due", Robots{Fresh: true, Unavailable: true, FetchedAt: t0}, 1, due, true},
		{"retry, asked since it was due", Robots{Fresh: true, Unavailable: true, FetchedAt: due.Add(time.Second)}, 1, due, false},
		{"retry without not_before", Robots{Fresh: true, Unavailable: true, FetchedAt: t0}, 1, time.Time{}, false},
		{"retry, robots.txt available", Robots{Fresh: true, FetchedAt: t0}, 2, due, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := RobotsDue(c.r, c.attempt, c.notBefore); got != c.want {
				t.Fatalf("RobotsDue = %v, want %v", got, c.want)
			}
		})
	}
}

func TestAfterRobotsAndPage(t *testing.T) {
	for _, c := range []struct {
		allowed, left bool
		after, page   Step // after the charge, when the step Charges
	}{
		{true, true, Requeue, Fetch},
		{true, false, Requeue, Refused},
		{false, true, Deny, Deny},
		{false, false, Refused, Refused},
	} {
		after := AfterRobots(c.allowed)
		if after.Charges() != !c.allowed {
			t.Errorf("AfterRobots(allowed %v) = %v: charges %v, only what it denies charges", c.allowed, after, after.Charges())
		}
		if got := Settle(after, c.left); got != c.after {
			t.Errorf("AfterRobots(allowed %v), left %v = %v, want %v", c.allowed, c.left, got, c.after)
		}
		page := Page(c.allowed)
		if !page.Charges() {
			t.Errorf("Page(allowed %v) = %v does not charge: every page's turn is charged", c.allowed, page)
		}
		if got := Settle(page, c.left); got != c.page {
			t.Errorf("Page(allowed %v), left %v = %v, want %v", c.allowed, c.left, got, c.page)
		}
	}
	for _, s := range []Step{Cancelled, Paused, Refused, FetchRobots, TakePage, Requeue} {
		if s.Charges() || Settle(s, false) != s {
			t.Errorf("%v charges, or Settle changed it", s)
		}
	}
}

func TestCharged(t *testing.T) {
	for _, c := range []struct {
		budgets bool
		attempt uint32
		revisit bool
		want    bool
	}{
		{true, 0, false, true},
		{false, 0, false, false},
		{true, 1, false, false},
		{true, 0, true, false},
	} {
		if got := Charged(c.budgets, c.attempt, c.revisit); got != c.want {
			t.Errorf("Charged(%v, %d, %v) = %v, want %v", c.budgets, c.attempt, c.revisit, got, c.want)
		}
	}
}

func TestYield(t *testing.T) {
	cases := []struct {
		name   string
		in     YieldInput
		better int64 // better-ranked requests counted (at most Left)
		want   bool
	}{
		{"as many shallower as pages left", YieldInput{Charged: true, Left: 2, Held: 5}, 2, true},
		{"more shallower than pages left", YieldInput{Charged: true, Left: 2, Held: 5}, 4, true},
		{"fewer shallower", YieldInput{Charged: true, Left: 2, Held: 5}, 1, false},
		{"not charged", YieldInput{Left: 2, Held: 5}, 4, false},
		{"yielded enough", YieldInput{Charged: true, Yields: MaxYields, Left: 2, Held: 5}, 4, false},
		{"unlimited", YieldInput{Charged: true, Left: -1, Held: 5}, 4, false},
		{"spent", YieldInput{Charged: true, Left: 0, Held: 5}, 4, false},
		{"more pages left than held", YieldInput{Charged: true, Left: 6, Held: 5}, 5, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Yield(c.in, min(c.better, max(c.in.Left, 0))); got != c.want {
				t.Fatalf("Yield = %v, want %v", got, c.want)
			}
			if !MayYield(c.in) && c.want {
				t.Fatal("Yield without MayYield: the better-ranked requests would be counted for nothing")
			}
		})
	}
	if YieldFor(time.Millisecond) != MinYield || YieldFor(3*time.Second) != 3*time.Second {
		t.Fatalf("YieldFor: %v %v", YieldFor(time.Millisecond), YieldFor(3*time.Second))
	}
}

// FuzzTurn holds a turn's steps to their preconditions: nothing is asked
// of a cancelled or paused crawl's request, the budget only when
// robots.txt is due, and each step follows from what was answered.
func FuzzTurn(f *testing.F) {
	f.Add(uint8(1), true, false, uint32(0), int64(0), int64(0), false)
	f.Add(uint8(1), true, true, uint32(1), int64(5), int64(10), true)
	f.Add(uint8(2), false, false, uint32(0), int64(0), int64(0), true)
	f.Fuzz(func(t *testing.T, state uint8, fresh, unavailable bool, attempt uint32, fetched, notBefore int64, spent bool) {
		st := crawlv1.CrawlState(state % 4)
		r := Robots{Fresh: fresh, Unavailable: unavailable, FetchedAt: t0.Add(time.Duration(fetched) * time.Second)}
		nb := time.Time{}
		if notBefore != 0 {
			nb = t0.Add(time.Duration(notBefore) * time.Second)
		}
		var askedRobots, askedSpent bool
		step := Turn(TurnInput{State: st, Attempt: attempt, NotBefore: nb,
			Robots: func() Robots { askedRobots = true; return r },
			Spent:  func() bool { askedSpent = true; return spent }})
		switch st {
		case cancelled, paused:
			if askedRobots || askedSpent {
				t.Fatalf("%v: asked robots %v budget %v", st, askedRobots, askedSpent)
			}
			if want := map[crawlv1.CrawlState]Step{cancelled: Cancelled, paused: Paused}[st]; step != want {
				t.Fatalf("%v: step %v", st, step)
			}
			return
		}
		due := RobotsDue(r, attempt, nb)
		if askedSpent != due {
			t.Fatalf("robots.txt due %v, budget asked %v", due, askedSpent)
		}
		switch {
		case !due && step != TakePage,
			due && spent && step != Refused,
			due && !spent && step != FetchRobots:
			t.Fatalf("due %v spent %v: step %v", due, spent, step)
		}
		if !fresh && !due {
			t.Fatal("nothing cached and robots.txt not due")
		}
	})
}

func TestSERPExempt(t *testing.T) {
	for _, c := range []struct {
		engine       string
		depth, hops  uint32
		ignore, want bool
	}{
		{"bing", 0, 0, true, true},
		{"bing", 0, 0, false, false},
		{"", 0, 0, true, false},
		{"bing", 1, 0, true, false},
		{"bing", 0, 1, true, false},
	} {
		if got := SERPExempt(c.engine, c.depth, c.hops, c.ignore); got != c.want {
			t.Errorf("SERPExempt(%q, %d, %d, %v) = %v, want %v", c.engine, c.depth, c.hops, c.ignore, got, c.want)
		}
	}
}

func TestRefusal(t *testing.T) {
	for _, c := range []struct {
		unavailable bool
		read, want  failure.Kind
	}{
		{false, failure.None, failure.RobotsDenied},
		{false, failure.Timeout, failure.RobotsDenied},
		{true, failure.None, failure.RobotsUnavailable},
		{true, failure.Redirect, failure.RobotsUnavailable},
		{true, failure.Timeout, failure.Timeout},
		{true, failure.DNS, failure.DNS},
	} {
		if got := Refusal(c.unavailable, c.read); got != c.want {
			t.Errorf("Refusal(%v, %q) = %q, want %q", c.unavailable, c.read, got, c.want)
		}
	}
}
