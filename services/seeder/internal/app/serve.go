package app

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/httpserve"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/services/seeder/internal/console"
	"github.com/trawl-crawler/trawl/services/seeder/internal/control"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
	"github.com/trawl-crawler/trawl/services/seeder/internal/stats"
)

// apiShutdownTimeout bounds how long in-flight API requests may finish.
const apiShutdownTimeout = 10 * time.Second

// Server is the crawl-jobs API's parts (seeder serve), built from its
// configuration.
type Server struct {
	log        *zap.Logger
	store      *chstore.Store
	writer     *kafkaio.Writer
	control    *control.Control
	discoverer *sitemaps.Discoverer
	jobs       *crawljobs.Service
	http       *httpserve.Server
	addr       net.Addr
}

// NewServer builds the API: the topics created, ClickHouse opened and
// migrated, the control-topic follower and the HTTP server (bound at
// once) constructed but nothing running yet. On error, what was opened is
// closed again.
func NewServer(ctx context.Context, cfg config.Serve, log *zap.Logger, reg prometheus.Registerer) (_ *Server, err error) {
	s := &Server{log: log}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	// ClickHouse waited for while it is down, migrated; the topics created.
	if s.store, err = service.Bootstrap(ctx, cfg.ClickHouse, cfg.Kafka, log, reg); err != nil {
		return nil, err
	}
	s.writer = kafkaio.NewWriter(cfg.Kafka, log, reg)
	s.control = control.New(cfg.Kafka, s.writer, log)
	s.control.SetPrevious(s.store)
	apiMetrics, err := api.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	s.discoverer = sitemaps.New(cfg.Sitemap)
	st := stats.New(s.store)
	s.jobs = crawljobs.New(s.control, st, s.discoverer, log)
	srv := api.New(api.Config{Token: cfg.APIToken, MaxBodyBytes: cfg.MaxBodyBytes}, s.jobs, st, apiMetrics, log)
	consoleMetrics, err := console.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	ui, err := console.New(console.Config{Token: cfg.APIToken, Partitions: cfg.Kafka.Partitions, Refresh: cfg.ConsoleRefresh, Fleet: cfg.Fleet}, s.jobs, st, s.store.Conn(), consoleMetrics, log)
	if err != nil {
		return nil, err
	}
	s.http = httpserve.New("api", cfg.APIAddr, &http.Server{Handler: Handler(srv.Handler(), ui.Handler()), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}, apiShutdownTimeout, log)
	if s.addr, err = s.http.Listen(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler serves the operator console under console.Prefix and the
// JSON API everywhere else.
func Handler(apiHandler, consoleHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, consoleHandler)
	mux.Handle("GET /ui", http.RedirectHandler(console.Prefix, http.StatusMovedPermanently))
	mux.Handle("/", apiHandler)
	return mux
}

// Addr is the API's listening address.
func (s *Server) Addr() net.Addr { return s.addr }

// Ping checks ClickHouse (the readiness check).
func (s *Server) Ping(ctx context.Context) error { return s.store.Ping(ctx) }

// FollowControl reads the control topic (the crawls' specifications the
// API answers from and revises) until ctx is done.
func (s *Server) FollowControl(ctx context.Context) error { return s.control.Run(ctx) }

// WaitCaughtUp returns once FollowControl has read the control topic to
// its end (the API answers 503 before), or ctx's error.
func (s *Server) WaitCaughtUp(ctx context.Context) error { return s.control.WaitCaughtUp(ctx) }

// Deleted crawls' rows are swept every sweepInterval, until a pass finds
// none sweepSettle after the deletion (records in flight land meanwhile).
const (
	sweepInterval = 30 * time.Second
	sweepSettle   = 10 * time.Minute
)

// SweepDeleted removes the rows of deleted crawls that are still in
// ClickHouse until ctx is done (crawljobs.Service.SweepDeleted).
func (s *Server) SweepDeleted(ctx context.Context) error {
	return s.jobs.SweepDeleted(ctx, sweepInterval, sweepSettle)
}

// Serve serves the API until ctx is done.
func (s *Server) Serve(ctx context.Context) error { return s.http.Run(ctx) }

// Close closes the sitemap discoverer, the Kafka writer and ClickHouse,
// logging what fails; call it once every part has stopped.
func (s *Server) Close() {
	if s.discoverer != nil {
		s.discoverer.Close()
	}
	if s.writer != nil {
		if err := s.writer.Close(); err != nil {
			s.log.Warn("close kafka writer", zap.Error(err))
		}
	}
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.log.Warn("close clickhouse", zap.Error(err))
		}
	}
}
