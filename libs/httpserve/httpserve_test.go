package httpserve

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func hello(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }

func TestRunServesUntilCancelled(t *testing.T) {
	s := New("api", "127.0.0.1:0", &http.Server{Handler: http.HandlerFunc(hello)}, 0, zap.NewNop())
	addr, err := s.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Listen(t.Context()); again.String() != addr.String() {
		t.Errorf("second Listen = %v, want %v", again, addr)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr.String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello" {
		t.Errorf("body %q", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if resp, err := client.Do(req); err == nil {
		_ = resp.Body.Close()
		t.Error("still serving after Run returned")
	}
}

func TestListenTaken(t *testing.T) {
	a := New("api", "127.0.0.1:0", &http.Server{}, 0, zap.NewNop())
	addr, err := a.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b := New("api", addr.String(), &http.Server{}, 0, zap.NewNop())
	if err := b.Run(t.Context()); err == nil || !strings.Contains(err.Error(), "listen api") {
		t.Fatalf("Run on a taken address = %v, want a listen error", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := a.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownTimeout: a request still running when the shutdown timeout
// passes is cut off and reported.
func TestShutdownTimeout(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	})
	s := New("api", "127.0.0.1:0", &http.Server{Handler: h}, 1, zap.NewNop()) // 1ns: expires at once
	addr, err := s.Listen(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	got := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr.String()+"/", nil)
		if err != nil {
			got <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		got <- err
	}()
	<-entered
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "shut down api") {
		t.Errorf("Run = %v, want a shutdown error", err)
	}
	close(release)
	if err := <-got; err == nil {
		t.Error("the cut-off request succeeded")
	}
	http.DefaultClient.CloseIdleConnections()
}
