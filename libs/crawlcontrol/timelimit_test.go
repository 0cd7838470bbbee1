package crawlcontrol_test

import (
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

var created = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// limited returns a spec created at created, in state, with a time limit
// of d (none when 0), last updated at updated after its creation.
func limited(state crawlv1.CrawlState, d, updated time.Duration) *crawlv1.CrawlSpec {
	spec := &crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, State: state,
		CreatedAt: timestamppb.New(created), UpdatedAt: timestamppb.New(created.Add(updated))}
	if d != 0 {
		spec.Limits = &crawlv1.Limits{MaxDuration: durationpb.New(d)}
	}
	return spec
}

// deleted marks spec deleted at after its creation.
func deleted(spec *crawlv1.CrawlSpec, at time.Duration) *crawlv1.CrawlSpec {
	spec.DeletedAt = timestamppb.New(created.Add(at))
	return spec
}

// TestStateAt: a crawl's state at a time, its time limit and its deletion
// included.
func TestStateAt(t *testing.T) {
	const (
		running   = crawlv1.CrawlState_CRAWL_STATE_RUNNING
		paused    = crawlv1.CrawlState_CRAWL_STATE_PAUSED
		cancelled = crawlv1.CrawlState_CRAWL_STATE_CANCELLED
		unset     = crawlv1.CrawlState_CRAWL_STATE_UNSPECIFIED
	)
	tests := []struct {
		name  string
		spec  *crawlv1.CrawlSpec
		at    time.Duration // after created
		want  crawlv1.CrawlState
		ended bool // EndedByTimeLimit of Effective's spec
	}{
		{name: "no spec", spec: nil, want: running},
		{name: "unspecified", spec: limited(unset, 0, 0), at: time.Hour, want: running},
		{name: "no limit", spec: limited(running, 0, 0), at: 1000 * time.Hour, want: running},
		{name: "before the limit", spec: limited(running, time.Hour, 0), at: time.Hour - time.Nanosecond, want: running},
		{name: "at the limit", spec: limited(running, time.Hour, 0), at: time.Hour, want: cancelled, ended: true},
		{name: "after the limit", spec: limited(running, time.Hour, 0), at: 2 * time.Hour, want: cancelled, ended: true},
		{name: "unspecified after the limit", spec: limited(unset, time.Hour, 0), at: 2 * time.Hour, want: cancelled, ended: true},
		{name: "paused before the limit", spec: limited(paused, time.Hour, time.Minute), at: 30 * time.Minute, want: paused},
		{name: "paused after the limit", spec: limited(paused, time.Hour, time.Minute), at: 2 * time.Hour, want: cancelled, ended: true},
		{name: "cancelled before the limit", spec: limited(cancelled, time.Hour, time.Minute), at: 2 * time.Hour, want: cancelled},
		{name: "cancelled after the limit", spec: limited(cancelled, time.Hour, 3*time.Hour), at: 4 * time.Hour, want: cancelled, ended: true},
		{name: "zero limit is none", spec: limited(running, 0, 0), at: time.Hour, want: running},
		{name: "negative limit is none", spec: limited(running, -time.Hour, 0), at: time.Hour, want: running},
		{name: "limit without creation time", spec: func() *crawlv1.CrawlSpec {
			s := limited(running, time.Hour, 0)
			s.CreatedAt = nil
			return s
		}(), at: 2 * time.Hour, want: running},
		{name: "deleted", spec: deleted(limited(cancelled, 0, time.Minute), time.Minute), at: time.Hour, want: cancelled},
		{name: "deleted saying running", spec: deleted(limited(running, 0, 0), time.Minute), at: time.Hour, want: cancelled},
		{name: "deleted before its limit", spec: deleted(limited(running, time.Hour, 0), 10*time.Minute), at: 2 * time.Hour, want: cancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := created.Add(tt.at)
			if got := crawlcontrol.StateAt(tt.spec, now); got != tt.want {
				t.Fatalf("StateAt = %v, want %v", got, tt.want)
			}
			eff := crawlcontrol.Effective(tt.spec, now)
			if got := eff.GetState(); tt.spec != nil && tt.want == cancelled && got != cancelled {
				t.Fatalf("Effective state = %v, want cancelled", got)
			}
			if tt.spec != nil && tt.want != cancelled && eff != tt.spec {
				t.Fatalf("Effective changed a spec whose state stands")
			}
			if got := crawlcontrol.EndedByTimeLimit(eff); got != tt.ended {
				t.Fatalf("EndedByTimeLimit = %v, want %v", got, tt.ended)
			}
			if crawlcontrol.Deleted(tt.spec) && tt.spec.GetState() != cancelled && !eff.GetUpdatedAt().AsTime().Equal(tt.spec.GetDeletedAt().AsTime()) {
				t.Fatalf("Effective of a deleted spec updated %v, want when it was deleted", eff.GetUpdatedAt().AsTime())
			}
			if tt.ended && tt.spec.GetState() != cancelled {
				end := created.Add(tt.spec.GetLimits().GetMaxDuration().AsDuration())
				if !eff.GetUpdatedAt().AsTime().Equal(end) || eff.GetRevision() != tt.spec.GetRevision() || tt.spec.GetState() == cancelled {
					t.Fatalf("Effective = updated %v revision %d, want updated at the deadline %v, same revision", eff.GetUpdatedAt().AsTime(), eff.GetRevision(), end)
				}
			}
		})
	}
}

// TestSpecsTimeLimit: Specs.State reports a crawl cancelled once its time
// limit passed on the table's clock, and Changed fires when it passes
// (the scheduler's pumps wait on it to drop the crawl's waiting URLs).
func TestSpecsTimeLimit(t *testing.T) {
	const limit = 300 * time.Millisecond
	start := time.Now()
	var clock atomic.Int64 // the table's clock, Unix nanoseconds; read by its timer too
	clock.Store(start.UnixNano())
	s := crawlcontrol.NewSpecsClock(func() time.Time { return time.Unix(0, clock.Load()) })
	spec := &crawlv1.CrawlSpec{CrawlId: "c", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING,
		CreatedAt: timestamppb.New(start), Limits: &crawlv1.Limits{MaxDuration: durationpb.New(limit)}}
	s.Apply(spec)
	s.Apply(&crawlv1.CrawlSpec{CrawlId: "later", Revision: 1, CreatedAt: timestamppb.New(start),
		Limits: &crawlv1.Limits{MaxDuration: durationpb.New(time.Hour)}})
	if got := s.State("c"); got != crawlv1.CrawlState_CRAWL_STATE_RUNNING {
		t.Fatalf("state before the limit = %v", got)
	}
	changed := s.Changed()
	select {
	case <-changed:
		t.Fatal("Changed fired long before the limit")
	case <-time.After(limit / 3):
	}
	select {
	case <-changed:
		if waited := time.Since(start); waited < limit {
			t.Fatalf("Changed fired after %v, before the limit of %v", waited, limit)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not fire at the time limit")
	}
	clock.Store(start.Add(limit).UnixNano())
	if got := s.State("c"); got != crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		t.Fatalf("state at the limit = %v, want cancelled", got)
	}
	if got := s.State("later"); got != crawlv1.CrawlState_CRAWL_STATE_RUNNING {
		t.Fatalf("another crawl's state = %v", got)
	}
	if s.Get("c").GetState() != crawlv1.CrawlState_CRAWL_STATE_RUNNING {
		t.Fatal("Get changed the specification")
	}
}
