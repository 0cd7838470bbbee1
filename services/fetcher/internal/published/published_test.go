package published

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRecent writes pages to partition 0 of a real (kfake) broker's
// fetched topic, stamped two minutes ago and now, and reads back the ones
// within the window before the last record, bodies dropped, with their
// host and fetcher.
func TestRecent(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	topic := kcfg.Topics().Fetched
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := kafkaio.NewWriter(kcfg, zaptest.NewLogger(t), prometheus.NewRegistry())
	defer w.Close()
	now := time.Now()
	key := []byte("a.test") // partition of the key: the test reads where it went
	part := kafkaio.PartitionFor(key, kcfg.Partitions)
	var msgs []kafka.Message
	for i := range 8 {
		at := now.Add(-2 * time.Minute)
		if i >= 5 {
			at = now.Add(time.Duration(i-8) * time.Second)
		}
		m, err := kafkaio.NewMessage(topic, key, &crawlv1.FetchedPage{CrawlId: "c", Url: fmt.Sprintf("http://a.test/%d", i),
			UrlFp: uint64(i), FetchedAt: timestamppb.New(at), Body: []byte("<html>"), StatusCode: 200})
		if err != nil {
			t.Fatal(err)
		}
		m.Time = at
		m.Headers = append(m.Headers, kafka.Header{Key: FetcherHeader, Value: []byte("fetcher-7")})
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		window     time.Duration
		maxRecords int
		partition  int
		want       []uint64
	}{
		{"window", 10 * time.Second, 0, part, []uint64{5, 6, 7}},
		{"whole partition", time.Hour, 0, part, []uint64{0, 1, 2, 3, 4, 5, 6, 7}},
		{"capped", time.Hour, 2, part, []uint64{6, 7}},
		{"no window: the last", 0, 0, part, []uint64{7}},
		{"empty partition", time.Hour, 0, 1 - part, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewReader(kcfg, topic, tt.window, tt.maxRecords).Recent(ctx, tt.partition)
			if err != nil {
				t.Fatal(err)
			}
			var fps []uint64
			for _, p := range got {
				fps = append(fps, p.Page.GetUrlFp())
				if p.Host != "a.test" || p.Fetcher != "fetcher-7" || p.Page.GetBody() != nil || p.Page.GetStatusCode() != 200 {
					t.Errorf("page %+v, want host a.test, fetcher-7, status 200 and no body", p)
				}
			}
			if fmt.Sprint(fps) != fmt.Sprint(tt.want) {
				t.Errorf("pages %v, want %v", fps, tt.want)
			}
		})
	}
}

// TestRecentGivesUp: against a "broker" that accepts connections and
// never answers, Recent returns its deadline's error after its timeout
// rather than holding the partition.
func TestRecentGivesUp(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(silent)
				return
			}
			silent <- c
		}
	}()
	defer func() {
		_ = ln.Close()
		for c := range silent {
			_ = c.Close()
		}
	}()
	kcfg := kafkaio.DefaultConfig()
	kcfg.Brokers = []string{ln.Addr().String()}
	r := NewReader(kcfg, kcfg.Topics().Fetched, time.Minute, 0)
	r.timeout = 300 * time.Millisecond
	start := time.Now()
	_, err = r.Recent(t.Context(), 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Recent against a silent broker: %v, want the deadline's error", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Recent gave up after %s, want about its 300ms timeout", took)
	}
}
