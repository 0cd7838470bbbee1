package stale_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/stale"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestLiveIDs(t *testing.T) {
	tests := []struct {
		name    string
		records []kafka.Message // on the proxies topic, in order
		want    []string
	}{
		{name: "empty topic", want: []string{}},
		{name: "latest record wins", records: []kafka.Message{
			{Key: []byte("a"), Value: []byte("x")},
			{Key: []byte("b"), Value: []byte("x")},
			{Key: []byte("c"), Value: []byte("x")},
			{Key: []byte("b")}, // tombstone
			{Key: []byte("d")}, // tombstone of an unknown id
			{Key: []byte("c")},
			{Key: []byte("c"), Value: []byte("y")}, // live again
		}, want: []string{"a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kc := kafkatest.Config(t, 2)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			if err := kafkaio.EnsureTopics(ctx, kc); err != nil {
				t.Fatal(err)
			}
			topic := kc.Topics().Proxies
			if len(tt.records) > 0 {
				w := kafkaio.NewWriter(kc, nil, nil)
				for _, m := range tt.records {
					m.Topic = topic
					if err := w.Write(ctx, m); err != nil {
						t.Fatal(err)
					}
				}
				w.Close()
			}
			got, err := stale.LiveIDs(ctx, kc, topic)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("LiveIDs = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
