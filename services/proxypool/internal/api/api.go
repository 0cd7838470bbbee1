// Package api serves the pool's state over HTTP: GET /proxies lists every
// tracked proxy as JSON, without credentials. It runs its own small server
// because telemetry.Admin takes no extra handlers.
package api

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/httpserve"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/pool"
)

// Source provides the pool's state; *pool.Pool implements it. Safe for
// concurrent use.
type Source interface {
	Snapshot() []pool.Status
}

// Proxy is one element of GET /proxies.
type Proxy struct {
	ID        string     `json:"id"`
	Scheme    string     `json:"scheme"`
	Addr      string     `json:"addr"` // host:port, never credentials
	Alive     bool       `json:"alive"`
	Checked   bool       `json:"checked"`
	Outcome   string     `json:"outcome,omitempty"`
	Error     string     `json:"error,omitempty"`
	LatencyMS float64    `json:"latency_ms"`
	Score     float64    `json:"score"`
	CheckedAt *time.Time `json:"checked_at,omitempty"`

	Success      float64 `json:"success"`             // EWMA of checks and fetcher feedback, 0..1
	Failures     int     `json:"failures"`            // consecutive failed checks
	Banned       bool    `json:"banned"`              // by fetcher feedback
	BlockedHosts int     `json:"blocked_hosts"`       // distinct hosts that blocked it
	Feedback     int     `json:"feedback"`            // fetcher reports received
	Anonymity    string  `json:"anonymity,omitempty"` // elite or anonymous, with --check-leaks
}

// Handler returns the API handler.
func Handler(src Source) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /proxies", func(w http.ResponseWriter, _ *http.Request) {
		statuses := src.Snapshot()
		out := make([]Proxy, 0, len(statuses))
		for _, st := range statuses {
			p := Proxy{
				ID:        st.Entry.ID(),
				Scheme:    st.Entry.Scheme,
				Addr:      st.Entry.Addr(),
				Alive:     st.Alive,
				Checked:   st.Checked,
				Outcome:   st.Outcome,
				Error:     st.Error,
				LatencyMS: math.Round(float64(st.Latency.Microseconds())) / 1000,
				Score:     st.Score,

				Success:      math.Round(st.Success*1000) / 1000,
				Failures:     st.Failures,
				Banned:       st.Banned,
				BlockedHosts: st.BlockedHosts,
				Feedback:     st.Feedback,
				Anonymity:    st.Anonymity,
			}
			if st.Checked {
				at := st.CheckedAt.UTC()
				p.CheckedAt = &at
			}
			out = append(out, p)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out) // a client that went away is not our error
	})
	return mux
}

// shutdownTimeout bounds how long in-flight API requests may finish.
const shutdownTimeout = 5 * time.Second

// Server is the API server.
type Server struct{ srv *httpserve.Server }

// New returns a server that will listen on addr.
func New(addr string, src Source, log *zap.Logger) *Server {
	return &Server{srv: httpserve.New("api", addr, &http.Server{
		Handler:           Handler(src),
		ReadHeaderTimeout: 5 * time.Second,
	}, shutdownTimeout, log)}
}

// Listen binds the listener; idempotent.
func (s *Server) Listen(ctx context.Context) (net.Addr, error) { return s.srv.Listen(ctx) }

// Run serves until ctx is done, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error { return s.srv.Run(ctx) }
