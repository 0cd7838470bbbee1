package crawlcontrol_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestFollowCaughtUp checks on a real broker that caughtUp comes only once
// every spec published before the start is in the table (many specs over
// several partitions, a tombstone and a poison record among them), and at
// once for an empty topic; later specs are still followed.
func TestFollowCaughtUp(t *testing.T) {
	tests := []struct {
		name  string
		specs int
	}{
		{"empty topic", 0},
		{"published before the start", 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := kafkatest.Config(t, 4)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			w := kafkaio.NewWriter(c, nil, nil)
			defer w.Close()
			topic := c.Topics().Control
			var msgs []kafka.Message
			for i := range tt.specs {
				m, err := crawlcontrol.Message(topic, &crawlv1.CrawlSpec{CrawlId: fmt.Sprintf("c%d", i), Revision: 1,
					State: crawlv1.CrawlState_CRAWL_STATE_CANCELLED})
				if err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
			if tt.specs > 0 {
				msgs = append(msgs,
					kafka.Message{Topic: topic, Key: []byte("c0")},                        // tombstone
					kafka.Message{Topic: topic, Key: []byte("x"), Value: []byte{0xff, 1}}, // poison
				)
				if err := w.Write(ctx, msgs...); err != nil {
					t.Fatal(err)
				}
			}

			specs := crawlcontrol.NewSpecs()
			caught := make(chan int, 1) // specs known when caughtUp was called
			fctx, fcancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- crawlcontrol.FollowCaughtUp(fctx, c, specs, func() { caught <- len(specs.All()) }, nil)
			}()
			want := max(tt.specs-1, 0) // c0 deleted
			select {
			case n := <-caught:
				if n != want {
					t.Errorf("caught up with %d specs known, want %d", n, want)
				}
			case <-ctx.Done():
				t.Fatal("never caught up")
			}
			// a spec published later is followed too
			m, err := crawlcontrol.Message(topic, &crawlv1.CrawlSpec{CrawlId: "late", Revision: 1, State: crawlv1.CrawlState_CRAWL_STATE_PAUSED})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Write(ctx, m); err != nil {
				t.Fatal(err)
			}
			for specs.State("late") != crawlv1.CrawlState_CRAWL_STATE_PAUSED {
				select {
				case <-specs.Changed():
				case <-time.After(100 * time.Millisecond):
				case <-ctx.Done():
					t.Fatal("late spec never followed")
				}
			}
			fcancel()
			if err := <-done; err != nil {
				t.Errorf("Follow returned %v after cancel", err)
			}
		})
	}
}

// TestGetSynced: a specification published after the follower caught up
// is returned by GetSynced even when the follower has not applied it yet
// (GetSynced waits for the follower to read the topic's current end); a
// crawl without one gets nil; a table nobody follows answers at once.
func TestGetSynced(t *testing.T) {
	c := kafkatest.Config(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	specs := crawlcontrol.NewSpecs()
	caught := make(chan struct{})
	fctx, fcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- crawlcontrol.FollowCaughtUp(fctx, c, specs, func() { close(caught) }, nil)
	}()
	defer func() {
		fcancel()
		if err := <-done; err != nil {
			t.Errorf("follow: %v", err)
		}
	}()
	<-caught
	w := kafkaio.NewWriter(c, nil, nil)
	defer w.Close()
	for i := range 5 {
		id := fmt.Sprintf("late-%d", i)
		m, err := crawlcontrol.Message(c.Topics().Control, &crawlv1.CrawlSpec{CrawlId: id, Revision: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(ctx, m); err != nil {
			t.Fatal(err)
		}
		spec, err := specs.GetSynced(ctx, id)
		if err != nil || spec.GetCrawlId() != id {
			t.Fatalf("GetSynced(%s) right after its publication = %v, %v; want its spec", id, spec, err)
		}
	}
	if spec, err := specs.GetSynced(ctx, "never-published"); spec != nil || err != nil {
		t.Errorf("GetSynced of a crawl without spec = %v, %v; want nil", spec, err)
	}
	if spec, err := crawlcontrol.NewSpecs().GetSynced(ctx, "x"); spec != nil || err != nil {
		t.Errorf("GetSynced without a follower = %v, %v; want nil at once", spec, err)
	}
}
