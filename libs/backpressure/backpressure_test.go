package backpressure

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

// gateLog records the pauses and resumes of the gate.
type gateLog struct{ calls []string }

func (g *gateLog) Pause()  { g.calls = append(g.calls, "pause") }
func (g *gateLog) Resume() { g.calls = append(g.calls, "resume") }

// TestPauseAndResume: a fetcher producing 100 pages a second to a parser
// that takes none; the lag is the age of the oldest page not taken. It
// pauses when that reaches High (10 s); the parser then stores 600 pages
// in 5 s, 600 waiting would take 5 s more: still paused; 900 taken, 400
// waiting at 180 a second take 2.2 s, under Low/2 (2.5 s): resumed. A failed
// measure resumes (the crawl does not stop for its monitor) and is
// counted; an old page with little waiting behind it pauses nothing; the
// paused time is counted.
func TestPauseAndResume(t *testing.T) {
	var (
		produced, taken int64
		err             error
	)
	g := &gateLog{}
	reg := prometheus.NewRegistry()
	t0 := time.Unix(1000, 0)
	clock := t0
	hold := NewHold(g, func() time.Time { return clock }, reg)
	m, nerr := New(Options{Next: "parser", High: 10 * time.Second}, func(context.Context) (int64, int64, error) { return produced, taken, err },
		hold, zaptest.NewLogger(t), reg)
	if nerr != nil {
		t.Fatal(nerr)
	}
	step := func(sec int, p, k int64, e error) (time.Duration, bool) {
		produced, taken, err = p, k, e
		clock = t0.Add(time.Duration(sec) * time.Second)
		m.Step(t.Context(), clock)
		return time.Duration(testutil.ToFloat64(m.m.lag) * float64(time.Second)), testutil.ToFloat64(hold.active) == 1
	}
	for sec := 1; sec <= 10; sec++ {
		if lag, paused := step(sec, int64(100*sec), 0, nil); paused || lag != time.Duration(sec-1)*time.Second {
			t.Fatalf("at %d s: lag %v, paused %v; want %d s, not paused", sec, lag, paused, sec-1)
		}
	}
	if lag, paused := step(11, 1100, 0, nil); !paused || lag != 10*time.Second {
		t.Fatalf("at 11 s: lag %v, paused %v; want 10s, paused", lag, paused)
	}
	// 600 taken: the oldest left is the 601st, first seen at 7 s
	if lag, paused := step(12, 1200, 600, nil); !paused || lag != 5*time.Second {
		t.Fatalf("at 12 s: lag %v, paused %v; want 5s, still paused", lag, paused)
	}
	if lag, paused := step(13, 1300, 900, nil); paused || lag != 3*time.Second {
		t.Fatalf("at 13 s: lag %v, paused %v; want 3s, resumed", lag, paused)
	}
	if _, paused := step(14, 0, 0, errors.New("broker unreachable")); paused {
		t.Fatal("paused on a failed measure")
	}
	if lag, paused := step(15, 1500, 1500, nil); paused || lag != 0 {
		t.Fatalf("at 15 s, everything taken: lag %v, paused %v", lag, paused)
	}
	for sec := 16; sec <= 26; sec++ {
		step(sec, int64(100*sec), 1500, nil)
	}
	if lag, paused := step(26, 2600, 1500, nil); !paused || lag != 10*time.Second {
		t.Fatalf("at 26 s: lag %v, paused %v; want 10s, paused", lag, paused)
	}
	if _, paused := step(27, 0, 0, errors.New("again")); paused {
		t.Fatal("a failed measure left the fetcher paused")
	}
	// The oldest page waiting was fetched 10 s ago (at 26 s), but the
	// parser, 109 pages a second since, stores the 110 waiting within a
	// second: no pause.
	if lag, paused := step(36, 2700, 2590, nil); paused || lag != 10*time.Second {
		t.Fatalf("at 36 s: lag %v, paused %v; want 10s and no pause", lag, paused)
	}
	want := []string{"pause", "resume", "pause", "resume"}
	if len(g.calls) != len(want) {
		t.Fatalf("gate calls %v, want %v", g.calls, want)
	}
	for i := range want {
		if g.calls[i] != want[i] {
			t.Fatalf("gate calls %v, want %v", g.calls, want)
		}
	}
	if n := testutil.ToFloat64(m.m.pauses); n != 2 {
		t.Errorf("pauses_total = %v, want 2", n)
	}
	if s := testutil.ToFloat64(hold.seconds); s != 2+1 {
		t.Errorf("paused_seconds_total = %v, want 3 (11 s to 13 s, 26 s to 27 s)", s)
	}
	if n := testutil.ToFloat64(m.m.failures); n != 2 {
		t.Errorf("downstream_lag_failures_total = %v, want 2", n)
	}
	if r := testutil.ToFloat64(m.m.records); r != 110 {
		t.Errorf("downstream_lag_records = %v, want the last measure's 110", r)
	}
	if len(m.seen) > 12 {
		t.Errorf("%d samples kept, want only those since the oldest page not taken", len(m.seen))
	}
}

// TestRunResumesAtStop: a monitor that paused resumes its gate when it
// stops, so that a stopping fetcher hands back nothing held.
func TestRunResumesAtStop(t *testing.T) {
	g := &signalGate{paused: make(chan struct{}, 1)}
	var n int64
	m, err := New(Options{Next: "parser", High: time.Nanosecond, Interval: time.Millisecond}, func(context.Context) (int64, int64, error) {
		n++ // a new page at every measure, none taken
		return n, 0, nil
	}, g, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	<-g.paused
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(g.calls) != 2 || g.calls[0] != "pause" || g.calls[1] != "resume" {
		t.Errorf("gate calls %v, want pause then resume", g.calls)
	}
}

// signalGate is a gateLog that also signals its first pause.
type signalGate struct {
	gateLog
	paused chan struct{}
}

func (g *signalGate) Pause() {
	g.gateLog.Pause()
	select {
	case g.paused <- struct{}{}:
	default:
	}
}

func TestOptions(t *testing.T) {
	if _, err := New(Options{Next: "parser"}, nil, &gateLog{}, zaptest.NewLogger(t), prometheus.NewRegistry()); err == nil {
		t.Error("New without High: no error")
	}
	if _, err := New(Options{High: time.Second}, nil, &gateLog{}, zaptest.NewLogger(t), prometheus.NewRegistry()); err == nil {
		t.Error("New without Next: no error")
	}
	m, err := New(Options{Next: "parser", High: 10 * time.Second, Low: 20 * time.Second}, nil, &gateLog{}, zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if m.opts.Low != 5*time.Second || m.opts.Interval != DefaultInterval {
		t.Errorf("options %+v, want Low 5 (a Low not under High is half of it) and the default interval", m.opts)
	}
}

// TestHold: two Monitors' pauses hold the gate paused once, until both
// resumed; the time paused in all is counted; a resume without a pause
// does nothing. Two Monitors of one registry share the labelled vectors.
func TestHold(t *testing.T) {
	g := &gateLog{}
	reg := prometheus.NewPedanticRegistry()
	t0 := time.Unix(0, 0)
	clock := t0
	h := NewHold(g, func() time.Time { return clock }, reg)
	h.Resume()
	h.Pause() // the parser's
	clock = t0.Add(2 * time.Second)
	h.Pause() // the scheduler's
	clock = t0.Add(3 * time.Second)
	h.Resume()
	if testutil.ToFloat64(h.active) != 1 || len(g.calls) != 1 {
		t.Fatalf("one of two holders resumed: active %v, gate calls %v; want paused, one pause", testutil.ToFloat64(h.active), g.calls)
	}
	clock = t0.Add(5 * time.Second)
	h.Resume()
	h.Resume()
	if len(g.calls) != 2 || g.calls[1] != "resume" || testutil.ToFloat64(h.active) != 0 {
		t.Fatalf("both resumed: gate calls %v, active %v", g.calls, testutil.ToFloat64(h.active))
	}
	if s := testutil.ToFloat64(h.seconds); s != 5 {
		t.Errorf("paused seconds %v, want 5 (0 s to 5 s, once)", s)
	}
	for _, next := range []string{"parser", "scheduler"} {
		if _, err := New(Options{Next: next, High: time.Second}, nil, h, zaptest.NewLogger(t), reg); err != nil {
			t.Fatalf("monitor of the %s: %v", next, err)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "downstream_lag_seconds"); err != nil || n != 2 {
		t.Errorf("downstream_lag_seconds series %d (%v), want one per stage", n, err)
	}
}
