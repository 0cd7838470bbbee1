package kafkaio

import (
	"testing"
	"time"
)

// TestLeaseAfterExpiredSession: an answer after a silence longer than the
// session timeout (most likely the coordinator's "unknown member") does
// not renew the lease: the session may be expired and the generation
// over. The lease renews again once the member joins a new generation, or
// once the generation has outlived two heartbeats since with the
// coordinator answering (a refused heartbeat would have ended it). An
// answer after a shorter silence renews it, and marks the end of a lapse
// when the silence was long enough for one.
func TestLeaseAfterExpiredSession(t *testing.T) {
	const session = 6 * time.Second
	margin := leaseMargin(session)
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

	l := newLease(session, time.Second)
	if !l.Expiry().IsZero() || !l.lapseEnded().IsZero() {
		t.Fatalf("a new lease: expiry %v, lapse ended %v; want zero", l.Expiry(), l.lapseEnded())
	}
	l.newGeneration(t0)
	l.renew(t0)
	if got, want := l.Expiry(), t0.Add(session-margin); !got.Equal(want) {
		t.Fatalf("expiry %v, want %v", got, want)
	}

	// A short lapse (5.5 s: past the margin, within the session) ends
	// with a renewal.
	t1 := t0.Add(5500 * time.Millisecond)
	l.renew(t1)
	if got, want := l.Expiry(), t1.Add(session-margin); !got.Equal(want) {
		t.Errorf("after a short lapse: expiry %v, want %v", got, want)
	}
	if got := l.lapseEnded(); !got.Equal(t1) {
		t.Errorf("after a short lapse: lapse ended %v, want %v", got, t1)
	}

	// Silent past the session: the next answer renews nothing.
	t2 := t1.Add(session + time.Second)
	l.renew(t2)
	if got := l.Expiry(); !got.Before(t2) {
		t.Errorf("after an expired session: expiry %v, want before the answer at %v", got, t2)
	}
	l.renew(t2.Add(time.Second))
	if got := l.Expiry(); !got.Before(t2) {
		t.Errorf("a second answer in the ended generation: expiry %v, want before %v", got, t2)
	}
	if got := l.lapseEnded(); !got.Equal(t2) {
		t.Errorf("lapse ended %v, want %v", got, t2)
	}

	// Still in the generation more than two heartbeats after the answer
	// that found the session expired, and answered: the heartbeats since
	// were those of a live session (a refused one ends the generation),
	// so the silence was the member's or a stalled coordinator's and the
	// lease renews. A fetcher whose process was starved of CPU past the
	// session timeout otherwise never made a request again.
	t25 := t2.Add(2*time.Second + time.Millisecond)
	l.renew(t25)
	if got, want := l.Expiry(), t25.Add(session-margin); !got.Equal(want) {
		t.Errorf("answered two heartbeats after the silence, in the same generation: expiry %v, want %v", got, want)
	}
	if got := l.lapseEnded(); !got.Equal(t25) {
		t.Errorf("lapse ended %v, want %v (when the lease renewed)", got, t25)
	}

	// A new generation: answers renew again.
	t3 := t25.Add(2 * time.Second)
	l.newGeneration(t3.Add(-time.Second))
	l.renew(t3)
	if got, want := l.Expiry(), t3.Add(session-margin); !got.Equal(want) {
		t.Errorf("in a new generation: expiry %v, want %v", got, want)
	}
}

// TestLeaseLapseOnlyInAGeneration: a JoinGroup that waits long at the
// coordinator (members joining at a crawl's start, a rebalance) is no
// lapse; a generation that ended in a silence (its heartbeat timed out)
// is, and the first answer after it ends the lapse; a generation ended by
// an answer (a rebalance's error) is not.
func TestLeaseLapseOnlyInAGeneration(t *testing.T) {
	const session, heartbeat = 6 * time.Second, 1200 * time.Millisecond
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

	l := newLease(session, heartbeat)
	l.renew(t0)                      // FindCoordinator
	l.renew(t0.Add(8 * time.Second)) // a JoinGroup that waited 8 s
	if got := l.lapseEnded(); !got.IsZero() {
		t.Errorf("a long join counted as a lapse ended at %v", got)
	}

	// A generation ended by an answer (a rebalance's error), then a long
	// join: no lapse.
	t1 := t0.Add(20 * time.Second)
	l.newGeneration(t1.Add(-100 * time.Millisecond))
	l.renew(t1)
	l.endGeneration(t1.Add(10 * time.Millisecond))
	l.renew(t1.Add(9 * time.Second))
	if got := l.lapseEnded(); !got.IsZero() {
		t.Errorf("a generation ended by an answer counted as a lapse ended at %v", got)
	}

	// A generation ended in a silence (the heartbeat timed out 5 s
	// after the last answer): the first answer after it ends the lapse.
	t2 := t1.Add(30 * time.Second)
	l.newGeneration(t2.Add(-100 * time.Millisecond))
	l.renew(t2)
	l.endGeneration(t2.Add(5 * time.Second))
	back := t2.Add(40 * time.Second)
	l.renew(back)
	if got := l.lapseEnded(); !got.Equal(back) {
		t.Errorf("after a generation ended in a silence: lapse ended %v, want %v", got, back)
	}
	l.renew(back.Add(time.Second))
	if got := l.lapseEnded(); !got.Equal(back) {
		t.Errorf("a later answer moved the lapse's end to %v, want %v", got, back)
	}
}
