package recorder

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"golang.org/x/sync/errgroup"

	"github.com/trawl-crawler/trawl/libs/chstore"
)

// orderProducer records the values of every write, in order, and fails
// every write while fail is set.
type orderProducer struct {
	mu     sync.Mutex
	writes [][]string
	fail   error
}

func (p *orderProducer) Write(_ context.Context, msgs ...kafka.Message) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	var w []string
	for _, m := range msgs {
		w = append(w, string(m.Value))
	}
	p.writes = append(p.writes, w)
	return nil
}

type nopLog struct{}

func (nopLog) Write(context.Context, ...chstore.FetchLogRow) error { return nil }

// TestLastAfterTheRest: the records of Outcome.Last (FetchedPages) are
// produced in a write of their own after every record of Msgs of the batch
// is durable, and not at all when those fail: a FetchedPage in the topic
// proves the rest of its outcome was published.
func TestLastAfterTheRest(t *testing.T) {
	tests := []struct {
		name string
		fail error
		want [][]string
	}{
		{"produced", nil, [][]string{{"retry-a", "state-a", "state-b"}, {"page-a", "page-b"}}},
		{"rest failed", errors.New("broker gone"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prod := &orderProducer{fail: tt.fail}
			rec, err := New(Options{Linger: 50 * time.Millisecond}, prod, nopLog{}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			recCtx, stop := context.WithCancel(ctx)
			var g errgroup.Group
			g.Go(func() error { return rec.Run(recCtx, time.Second) })
			errs := make(chan error, 2)
			msg := func(v string) kafka.Message { return kafka.Message{Value: []byte(v)} }
			rec.Record(ctx, Outcome{Msgs: []kafka.Message{msg("retry-a"), msg("state-a")}, Last: []kafka.Message{msg("page-a")},
				Done: func(err error) { errs <- err }})
			rec.Record(ctx, Outcome{Msgs: []kafka.Message{msg("state-b")}, Last: []kafka.Message{msg("page-b")},
				Done: func(err error) { errs <- err }})
			for range 2 {
				if err := <-errs; (err != nil) != (tt.fail != nil) {
					t.Errorf("Done(%v), want failure %v", err, tt.fail != nil)
				}
			}
			stop()
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			if got := prod.writes; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
}
