// Package controltest runs the seeder's control table (internal/control)
// over a real broker for tests, with a clock a test can move forward: the
// api, console and crawljobs tests each stand on one.
package controltest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
)

// Clock is a control table's clock: the real time plus what a test added,
// so that a crawl's time limit passes without waiting for it.
type Clock struct{ d atomic.Int64 }

// Now returns the real time plus what was added.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.d.Load())) }

// Add moves the clock forward by d.
func (c *Clock) Add(d time.Duration) { c.d.Add(int64(d)) }

// Start creates kc's topics and runs a control table over them, its
// producer's metrics in reg, until the test ends; it returns once the
// table has caught up with the control topic.
func Start(t *testing.T, kc kafkaio.Config, reg prometheus.Registerer) (*control.Control, *Clock) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	if err := kafkaio.EnsureTopics(ctx, kc); err != nil {
		cancel()
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kc, zap.NewNop(), reg)
	clock := &Clock{}
	ctl := control.NewClock(kc, w, zap.NewNop(), clock.Now)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := ctl.Run(ctx); err != nil {
			t.Errorf("control run: %v", err)
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = w.Close() // as the tests did: the test is over, nothing waits for the writer

	})
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if err := ctl.WaitCaughtUp(wctx); err != nil {
		t.Fatalf("control never caught up: %v", err)
	}
	return ctl, clock
}
