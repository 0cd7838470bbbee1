package crawlcontrol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestSpecsApplyKeepsNewestRevision(t *testing.T) {
	tests := []struct {
		name      string
		revisions []uint64
		want      uint64
	}{
		{"in order", []uint64{1, 2, 3}, 3},
		{"older after newer is ignored", []uint64{5, 2}, 5},
		{"equal revision replaces", []uint64{4, 4}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := crawlcontrol.NewSpecs()
			for _, r := range tt.revisions {
				s.Apply(&crawlv1.CrawlSpec{CrawlId: "c", Revision: r})
			}
			if got := s.Get("c").GetRevision(); got != tt.want {
				t.Errorf("revision = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestSpecsStateDefaultsToRunning(t *testing.T) {
	s := crawlcontrol.NewSpecs()
	if got := s.State("unknown"); got != crawlv1.CrawlState_CRAWL_STATE_RUNNING {
		t.Errorf("unknown crawl state = %v", got)
	}
	s.Apply(&crawlv1.CrawlSpec{CrawlId: "c"})
	if got := s.State("c"); got != crawlv1.CrawlState_CRAWL_STATE_RUNNING {
		t.Errorf("unspecified state = %v", got)
	}
	if s.Apply(&crawlv1.CrawlSpec{}) {
		t.Error("a spec without crawl id was applied")
	}
}

// TestFollow publishes specs, a newer revision, a tombstone and a poison
// record to a real broker and checks the table the follower builds.
func TestFollow(t *testing.T) {
	c := kafkatest.Config(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := kafkaio.NewWriter(c, nil, nil)
	defer w.Close()
	topic := c.Topics().Control

	var msgs []kafka.Message
	for _, spec := range []*crawlv1.CrawlSpec{
		{CrawlId: "a", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_RUNNING},
		{CrawlId: "b", Revision: 1},
		{CrawlId: "a", Revision: 2, State: crawlv1.CrawlState_CRAWL_STATE_PAUSED},
	} {
		m, err := crawlcontrol.Message(topic, spec)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	msgs = append(msgs,
		kafka.Message{Topic: topic, Key: []byte("b")},                         // tombstone
		kafka.Message{Topic: topic, Key: []byte("x"), Value: []byte{0xff, 1}}, // poison
	)
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	if _, err := crawlcontrol.Message(topic, &crawlv1.CrawlSpec{}); !errors.Is(err, crawlcontrol.ErrNoCrawlID) {
		t.Errorf("Message without id: err = %v", err)
	}

	specs := crawlcontrol.NewSpecs()
	errs := make(chan error, 10)
	fctx, fcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- crawlcontrol.Follow(fctx, c, specs, func(err error) { errs <- err }) }()

	deadline := time.After(20 * time.Second)
	for specs.State("a") != crawlv1.CrawlState_CRAWL_STATE_PAUSED || specs.Get("b") != nil || len(errs) == 0 {
		select {
		case <-specs.Changed():
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("follower state: a=%v b=%v errors=%d", specs.State("a"), specs.Get("b"), len(errs))
		}
	}
	fcancel()
	if err := <-done; err != nil {
		t.Errorf("Follow returned %v after cancel", err)
	}
	if n := len(specs.All()); n != 1 {
		t.Errorf("%d specs known, want 1 (b was deleted)", n)
	}
}

// TestFollowClaims: claim records reach onClaim in topic order, each seeing
// the specifications before it; a follower without onClaim (every other
// service) skips them silently, and a claim key's tombstone deletes no
// crawl.
func TestFollowClaims(t *testing.T) {
	c := kafkatest.Config(t, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := kafkaio.NewWriter(c, nil, nil)
	defer w.Close()
	topic := c.Topics().Control

	spec := func(id string) kafka.Message {
		m, err := crawlcontrol.Message(topic, &crawlv1.CrawlSpec{CrawlId: id, Revision: 1})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	claim := func(id, by string) kafka.Message {
		m, err := crawlcontrol.ClaimMessage(topic, &crawlv1.CrawlClaim{CrawlId: id, Claimant: by})
		if err != nil {
			t.Fatal(err)
		}
		if !crawlcontrol.IsClaim(m) {
			t.Fatalf("claim record with key %q is not a claim", m.Key)
		}
		return m
	}
	if err := w.Write(ctx,
		claim("a", "x"), spec("a"), claim("a", "y"), claim("b", "z"),
		kafka.Message{Topic: topic, Key: []byte(crawlcontrol.ClaimKeyPrefix + "a")}, // a claim key's tombstone
		spec("c"),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := crawlcontrol.ClaimMessage(topic, &crawlv1.CrawlClaim{}); !errors.Is(err, crawlcontrol.ErrNoCrawlID) {
		t.Errorf("ClaimMessage without id: err = %v", err)
	}

	type seen struct {
		id, by  string
		specced bool
	}
	tests := []struct {
		name    string
		claims  bool
		want    []seen
		wantIDs int
	}{
		{"with onClaim", true, []seen{{"a", "x", false}, {"a", "y", true}, {"b", "z", false}}, 2},
		{"without onClaim", false, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs := crawlcontrol.NewSpecs()
			var got []seen // written by the follower before caughtUp
			var onClaim func(*crawlv1.CrawlClaim, kafka.Message)
			if tt.claims {
				onClaim = func(cl *crawlv1.CrawlClaim, _ kafka.Message) {
					got = append(got, seen{cl.GetCrawlId(), cl.GetClaimant(), specs.Get(cl.GetCrawlId()) != nil})
				}
			}
			var errs []error
			caught := make(chan struct{})
			fctx, fcancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- crawlcontrol.FollowClaims(fctx, c, specs, func() { close(caught) }, onClaim, func(err error) { errs = append(errs, err) })
			}()
			select {
			case <-caught:
			case <-ctx.Done():
				t.Fatal("follower never caught up")
			}
			fcancel()
			if err := <-done; err != nil {
				t.Errorf("FollowClaims returned %v after cancel", err)
			}
			if len(errs) > 0 {
				t.Errorf("errors reported: %v", errs)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("claims seen %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("claim %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			if n := len(specs.All()); n != tt.wantIDs || specs.Get("a") == nil || specs.Get("c") == nil {
				t.Errorf("specs a=%v c=%v (%d in all), want a and c only", specs.Get("a"), specs.Get("c"), n)
			}
		})
	}
}
