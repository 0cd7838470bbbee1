package doctext

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// startPeak samples the Go heap (live and dead objects not yet swept)
// every millisecond until the returned function is called; that returns
// the peak's growth over the heap at the start, after a collection.
func startPeak() func() int64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 {
		metrics.Read(sample)
		return int64(sample[0].Value.Uint64())
	}
	base := read()
	var (
		mu   sync.Mutex
		peak = base
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				v := read()
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		v := read()
		mu.Lock()
		defer mu.Unlock()
		return max(peak, v) - base
	}
}
