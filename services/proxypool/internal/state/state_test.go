package state

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
)

// TestMessageDecode: every kind of state survives the record round trip
// (last-check latency to the microsecond, as the proxies topic carries
// it), and records that are no usable state are errors.
func TestMessageDecode(t *testing.T) {
	e, _, err := proxylist.ParseLine("http://u:p%40ss@127.0.0.9:3128")
	if err != nil {
		t.Fatal(err)
	}
	id := e.ID()
	live := pool.State{ID: id, Version: 7, Harvested: true, LatencyEWMA: 0.25, BlockedHosts: []string{"a.example", "b.example"},
		Status: pool.Status{Entry: e, Alive: true, Checked: true, Outcome: "ok", Latency: 1234 * time.Microsecond,
			CheckedAt: time.Unix(1700000000, 5).UTC(), Score: 0.42, Success: 0.6, Failures: 0, BlockedHosts: 2, Feedback: 9, Anonymity: "elite"}}
	tests := []struct {
		name string
		st   pool.State
	}{
		{"live", live},
		{"forgotten", pool.State{ID: id, Version: 8, Gone: true}},
		{"banned and evicted", pool.State{ID: id, Version: 9, Gone: true, Banned: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Message("topic", tt.st, "me")
			if err != nil {
				t.Fatal(err)
			}
			if (m.Value == nil) != (tt.st.Gone && !tt.st.Banned) {
				t.Errorf("value nil = %v, want a tombstone only for a plain forget", m.Value == nil)
			}
			if header(m, WriterHeader) != "me" {
				t.Errorf("writer header %q", header(m, WriterHeader))
			}
			got, err := Decode(m)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.st) {
				t.Errorf("round trip\n%+v\nwant\n%+v", got, tt.st)
			}
		})
	}

	good, err := Message("topic", live, "me")
	if err != nil {
		t.Fatal(err)
	}
	otherKey := good
	otherKey.Key = []byte("0000000000000000")
	bad := []struct {
		name string
		m    kafka.Message
	}{
		{"key of another proxy", otherKey},
		{"tombstone without version", kafka.Message{Key: []byte(id)}},
		{"garbage", kafka.Message{Key: []byte(id), Value: []byte{0xff, 0xff}}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode(tt.m); err == nil {
				t.Error("decoded")
			} else if tt.name != "garbage" && !errors.Is(err, ErrBadState) {
				t.Errorf("err = %v, want ErrBadState", err)
			}
		})
	}
}
