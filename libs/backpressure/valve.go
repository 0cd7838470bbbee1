package backpressure

import (
	"context"
	"sync"
)

// Valve is a Gate for a consumer that holds back by not starting its next
// batch: Pause closes it, Resume opens it, and Wait returns at once while
// it is open and blocks while it is closed. The zero Valve is open. Safe
// for concurrent use.
type Valve struct {
	mu   sync.Mutex
	shut chan struct{} // closed by Resume; nil while open
}

// Pause closes the valve: Wait blocks from now on.
func (v *Valve) Pause() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.shut == nil {
		v.shut = make(chan struct{})
	}
}

// Resume opens the valve and lets every waiting Wait return.
func (v *Valve) Resume() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.shut != nil {
		close(v.shut)
		v.shut = nil
	}
}

// Wait returns nil once the valve is open, or ctx's error if ctx ends
// first.
func (v *Valve) Wait(ctx context.Context) error {
	v.mu.Lock()
	shut := v.shut
	v.mu.Unlock()
	if shut == nil {
		return nil
	}
	select {
	case <-shut:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
