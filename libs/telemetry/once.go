package telemetry

import "sync"

// MaxOnce bounds the keys a Once remembers; past it, First reports false
// for every new key (the caller logs those at a lower level, or not).
const MaxOnce = 4096

// Once remembers which keys something was logged for, so that a condition
// met on every request (a crawl's spent page budget, an exemption it asked
// for) is logged at info once per key rather than once per request. The
// zero value is ready; safe for concurrent use.
type Once struct {
	mu   sync.Mutex
	seen map[[2]string]struct{}
}

// First reports whether (a, b) is seen for the first time, and remembers
// it unless MaxOnce keys are remembered already.
func (o *Once) First(a, b string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := [2]string{a, b}
	if _, ok := o.seen[k]; ok || len(o.seen) >= MaxOnce {
		return false
	}
	if o.seen == nil {
		o.seen = make(map[[2]string]struct{})
	}
	o.seen[k] = struct{}{}
	return true
}
