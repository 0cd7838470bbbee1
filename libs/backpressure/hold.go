package backpressure

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Hold is the Gate the Monitors of one fetcher share: its gate (the worker
// pool) is paused while any of them holds it paused, and resumed when the
// last one resumes it. It counts the time paused in all
// (backpressure_paused, backpressure_paused_seconds_total). Safe for
// concurrent use.
type Hold struct {
	mu      sync.Mutex
	gate    Gate
	now     func() time.Time
	holders int       // Monitors holding it paused
	since   time.Time // when the gate paused; zero: running
	active  prometheus.Gauge
	seconds prometheus.Counter
}

// NewHold returns a Hold of gate; reg receives its metrics; now is the
// clock (time.Now).
func NewHold(gate Gate, now func() time.Time, reg prometheus.Registerer) *Hold {
	return &Hold{gate: gate, now: now,
		active: telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "backpressure_paused",
			Help: "1 while new requests are paused because a stage after the fetcher is behind (--max-downstream-lag, --max-scheduler-lag), else 0.",
		})),
		seconds: telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "backpressure_paused_seconds_total",
			Help: "Seconds new requests spent paused because a stage after the fetcher was behind.",
		})),
	}
}

// Pause holds the gate paused for one more holder.
func (h *Hold) Pause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holders++
	if h.holders == 1 {
		h.since = h.now()
		h.active.Set(1)
		h.gate.Pause()
	}
}

// Resume releases one holder's pause; the gate runs again when none is
// left.
func (h *Hold) Resume() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holders == 0 {
		return
	}
	h.holders--
	if h.holders == 0 {
		h.seconds.Add(h.now().Sub(h.since).Seconds())
		h.since = time.Time{}
		h.active.Set(0)
		h.gate.Resume()
	}
}
