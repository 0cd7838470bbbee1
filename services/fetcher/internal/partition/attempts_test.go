package partition

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

func TestAttempts(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	req := func(url string, attempt uint32, at time.Time, revisit bool) *crawlv1.FetchRequest {
		return &crawlv1.FetchRequest{CrawlId: "c", Url: url, Attempt: attempt, ScheduledAt: timestamppb.New(at), Revisit: revisit}
	}
	tests := []struct {
		name  string
		first *crawlv1.FetchRequest
		done  bool // first finished (else held)
		next  *crawlv1.FetchRequest
		want  bool // next claimed
	}{
		{"same request held", req("http://a/1", 0, t0, false), false, req("http://a/1", 0, t0, false), false},
		{"same request done", req("http://a/1", 0, t0, false), true, req("http://a/1", 0, t0, false), false},
		{"url admitted twice", req("http://a/1", 0, t0, false), true, req("http://a/1", 0, t0.Add(time.Second), false), false},
		{"next attempt", req("http://a/1", 0, t0, false), true, req("http://a/1", 1, t0, false), true},
		{"retry delivered twice", req("http://a/1", 1, t0, false), true, req("http://a/1", 1, t0, false), false},
		{"revisit later", req("http://a/1", 0, t0, false), true, req("http://a/1", 0, t0.Add(time.Hour), true), true},
		{"revisit delivered twice", req("http://a/1", 0, t0.Add(time.Hour), true), true, req("http://a/1", 0, t0.Add(time.Hour), true), false},
		{"other url", req("http://a/1", 0, t0, false), true, req("http://a/2", 0, t0, false), true},
		{"other crawl", req("http://a/1", 0, t0, false), true, &crawlv1.FetchRequest{CrawlId: "d", Url: "http://a/1", ScheduledAt: timestamppb.New(t0)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAttempts(8)
			if !a.Claim(KeyOf(tt.first)) {
				t.Fatal("first claim refused")
			}
			if tt.done {
				a.Finish(KeyOf(tt.first))
			}
			if got := a.Claim(KeyOf(tt.next)); got != tt.want {
				t.Errorf("Claim(next) = %v, want %v", got, tt.want)
			}
		})
	}

	t.Run("released attempt comes back", func(t *testing.T) {
		a := NewAttempts(8)
		r := req("http://a/1", 0, t0, false)
		a.Claim(KeyOf(r))
		a.Release(KeyOf(r))
		if !a.Claim(KeyOf(r)) {
			t.Error("a released attempt was refused: its record would be lost")
		}
	})
	t.Run("release keeps a finished attempt", func(t *testing.T) {
		a := NewAttempts(8)
		r := req("http://a/1", 0, t0, false)
		a.Claim(KeyOf(r))
		a.Finish(KeyOf(r))
		a.Release(KeyOf(r))
		if a.Claim(KeyOf(r)) {
			t.Error("a finished attempt was forgotten by Release")
		}
	})
	t.Run("bounded", func(t *testing.T) {
		a := NewAttempts(8)
		for i := range 100 {
			a.Claim(KeyOf(req(fmt.Sprintf("http://a/%d", i), 0, t0, false)))
		}
		if n := a.Len(); n > 16 {
			t.Errorf("%d attempts remembered, bound 16", n)
		}
		if a.Claim(KeyOf(req("http://a/99", 0, t0, false))) {
			t.Error("the latest attempt was forgotten")
		}
	})
}
