package app

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/testkit/svctest"
)

// loadServe returns the configuration of `seeder serve` for a real broker
// and a fresh ClickHouse database; broken replaces the broker or ClickHouse
// address by one nothing listens on.
func loadServe(t *testing.T, broken string) config.Serve {
	t.Helper()
	args := append(svctest.Args(t, broken), "--api-addr", "127.0.0.1:0", "--api-token", "0123456789abcdef")
	cfg, err := config.LoadServe(args, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestNewServer builds the API against a real broker and ClickHouse: it is
// bound at once, answers once served, catches up with the (empty) control
// topic, and everything stops with its context (TestMain finds no
// goroutine left).
func TestNewServer(t *testing.T) {
	s, err := NewServer(t.Context(), loadServe(t, ""), zaptest.NewLogger(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 2)
	go func() { done <- s.FollowControl(ctx) }()
	go func() { done <- s.Serve(ctx) }()
	if err := s.WaitCaughtUp(ctx); err != nil {
		t.Errorf("WaitCaughtUp: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr().String()+"/v1/crawls/none", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer 0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("GET /v1/crawls/none: %v", err)
	} else {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /v1/crawls/none = %d, want 404", resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	for range 2 {
		if err := <-done; err != nil {
			t.Errorf("stopped part: %v", err)
		}
	}
}

// TestNewServerFails: a part that cannot be built fails NewServer with
// the step named, and what was opened before it is closed.
func TestNewServerFails(t *testing.T) {
	tests := []struct {
		broken, wantErr string
	}{
		{broken: "kafka", wantErr: "ensure topics"},
		{broken: "clickhouse", wantErr: "open clickhouse"},
	}
	for _, tt := range tests {
		t.Run(tt.broken, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			s, err := NewServer(ctx, loadServe(t, tt.broken), zaptest.NewLogger(t), prometheus.NewRegistry())
			if err == nil {
				s.Close()
				t.Fatal("NewServer succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewServer = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// TestTwoServersOneOwner runs two API servers, as `seeder serve` builds
// them, on one broker and one ClickHouse database, and submits each new
// crawl id to both at once: every time one answers 201 and the other 409.
func TestTwoServersOneOwner(t *testing.T) {
	args := append(svctest.Args(t, svctest.None), "--api-addr", "127.0.0.1:0", "--api-token", "0123456789abcdef")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var servers []*Server
	done := make(chan error, 4)
	for range 2 {
		cfg, err := config.LoadServe(args, func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewServer(ctx, cfg, zaptest.NewLogger(t), prometheus.NewRegistry())
		if err != nil {
			t.Fatalf("NewServer: %v", err)
		}
		defer s.Close()
		go func() { done <- s.FollowControl(ctx) }()
		go func() { done <- s.Serve(ctx) }()
		if err := s.WaitCaughtUp(ctx); err != nil {
			t.Fatalf("WaitCaughtUp: %v", err)
		}
		servers = append(servers, s)
	}
	post := func(s *Server, id string) int {
		body := `{"crawl_id":"` + id + `","seeds":["http://127.0.0.2/"]}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Addr().String()+"/v1/crawls", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer 0123456789abcdef")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("POST /v1/crawls: %v", err)
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for round := range 10 {
		id := "two-" + strconv.Itoa(round)
		codes := make(chan int, 2)
		for _, s := range servers {
			go func() { codes <- post(s, id) }()
		}
		got := map[int]int{}
		for range 2 {
			got[<-codes]++
		}
		if got[http.StatusCreated] != 1 || got[http.StatusConflict] != 1 {
			t.Errorf("round %d: answers %v, want one 201 and one 409", round, got)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	for range 4 {
		if err := <-done; err != nil {
			t.Errorf("stopped part: %v", err)
		}
	}
}
