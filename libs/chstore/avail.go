package chstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/backoff"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// A ClickHouse that is down is weather, not a fault: the store waits for
// it, reads and inserts alike, for as long as it takes, and says so once
// when it goes away and once when it is back (with how long it was gone).
// Errors no waiting fixes (a refused password, a bad query) are returned
// at once.

// ClickHouse error codes no waiting fixes: the credentials are refused.
const (
	codeUnknownUser          = 192
	codeWrongPassword        = 193
	codeRequiredPassword     = 194
	codeAuthenticationFailed = 516
)

// ErrAuth is a ClickHouse refusing the configured credentials: waiting does
// not fix it, so the service stops with the server's reason.
var ErrAuth = errors.New("clickhouse refused the credentials")

// isAuthError reports an error of refused credentials.
func isAuthError(err error) bool {
	var ex *clickhouse.Exception
	if errors.As(err, &ex) {
		switch ex.Code {
		case codeUnknownUser, codeWrongPassword, codeRequiredPassword, codeAuthenticationFailed:
			return true
		}
	}
	return false
}

// Waits between two attempts while ClickHouse is unavailable: from the
// first, doubled up to the last, each jittered between half and all of it
// so that the services of a fleet do not knock in step.
const (
	firstWait = 100 * time.Millisecond
	maxWait   = 5 * time.Second
)

// newWaitBackoff is the jittered, doubling wait between attempts.
func newWaitBackoff() *backoff.Backoff { return backoff.Jittered(firstWait, maxWait) }

// availability is what the store knows of ClickHouse's reachability: since
// when it has been failing, and why. Safe for concurrent use.
type availability struct {
	log  *zap.Logger
	addr []string // the servers waited for, named in the log lines

	mu     sync.Mutex
	since  time.Time // zero while available
	reason error
}

// down records a failed attempt; the first one of an outage is logged.
func (a *availability) down(what string, err error) {
	a.mu.Lock()
	first := a.since.IsZero()
	if first {
		a.since = time.Now()
	}
	a.reason = err
	a.mu.Unlock()
	if first {
		a.log.Warn("clickhouse unavailable, waiting for it; nothing is acknowledged meanwhile",
			zap.Strings("clickhouse_addr", a.addr), zap.String("query", what), zap.Error(err))
	}
}

// up records a successful attempt; the end of an outage is logged.
func (a *availability) up() {
	a.mu.Lock()
	since := a.since
	a.since, a.reason = time.Time{}, nil
	a.mu.Unlock()
	if !since.IsZero() {
		a.log.Info("clickhouse available again", zap.Strings("clickhouse_addr", a.addr),
			zap.Duration("unavailable_for", time.Since(since).Round(time.Millisecond)))
	}
}

// state returns since when ClickHouse has been unavailable and why (zero
// when it is available).
func (a *availability) state() (time.Time, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.since, a.reason
}

// Unavailable reports whether the store is waiting for ClickHouse: since
// when, and the last error. For readiness checks and metrics.
func (s *Store) Unavailable() (waiting bool, since time.Time, reason error) {
	since, reason = s.avail.state()
	return !since.IsZero(), since, reason
}

// Register exports whether the store is waiting for ClickHouse as the
// gauge dependency_waiting{dependency="clickhouse"} (1 while it waits), on
// reg (a service's prefixed registerer: crawler_<service>_...).
func (s *Store) Register(reg prometheus.Registerer) error {
	if err := reg.Register(telemetry.DependencyGauge("clickhouse", func() bool {
		waiting, _, _ := s.Unavailable()
		return waiting
	})); err != nil {
		return fmt.Errorf("register clickhouse availability: %w", err)
	}
	return nil
}

// OpenWaiting is Open that waits for ClickHouse: while the server cannot
// be reached it tries again with back-off (logging once when it starts
// waiting and once when the server answers) until ctx is done. Refused
// credentials and configuration errors are returned at once.
func OpenWaiting(ctx context.Context, c Config, log *zap.Logger) (*Store, error) {
	if log == nil {
		log = zap.NewNop()
	}
	a := &availability{log: log, addr: c.Addr}
	b := newWaitBackoff()
	for {
		s, err := Open(ctx, c, log)
		if err == nil {
			a.up()
			return s, nil
		}
		if isAuthError(err) {
			return nil, fmt.Errorf("%w: %w", ErrAuth, err)
		}
		if !isUnavailable(err) || ctx.Err() != nil {
			return nil, err
		}
		a.down("open", err)
		if werr := b.Wait(ctx); werr != nil {
			return nil, fmt.Errorf("wait for clickhouse: %w (last: %w)", werr, err)
		}
	}
}

// isUnavailable reports an error of a server that cannot be reached or
// went away (isRetryableRead), or one that is starting (it refuses
// queries while it loads its tables).
func isUnavailable(err error) bool {
	if isRetryableRead(err) {
		return true
	}
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && ex.Code == codeTableIsReadOnly
}

// codeTableIsReadOnly (TABLE_IS_READ_ONLY): a replicated table whose
// ZooKeeper is away, or a server still loading.
const codeTableIsReadOnly = 242

// ClickHouse error codes of a server that answers without the crawler's
// database or tables: a server that came back from a lost volume.
const (
	codeUnknownTable    = 60
	codeUnknownDatabase = 81
)

// isMissing reports an error of a database or table that does not exist.
func isMissing(err error) bool {
	var ex *clickhouse.Exception
	return errors.As(err, &ex) && (ex.Code == codeUnknownTable || ex.Code == codeUnknownDatabase)
}

// recreate answers a server that came back without the crawler's database
// or tables (a lost volume): it creates them again (the database, every
// migration) and says what the crawl no longer knows, and reports whether
// the failed query may be tried again.
func (s *Store) recreate(ctx context.Context, what string, cause error) bool {
	if s.boot == nil || !isMissing(cause) {
		return false
	}
	s.log.Warn("clickhouse answers without the crawler's tables (a lost volume?): creating them again; "+
		"what was stored before is gone: seen URLs are fetched again, budgets and per-host counts start over, the fetch log and documents of earlier pages are lost",
		zap.String("query", what), zap.Error(cause))
	boot, err := s.boot()
	if err != nil {
		s.log.Warn("recreate the crawler's tables failed, retrying", zap.Error(err))
		return true
	}
	err = createDatabase(ctx, boot, s.db, s.cluster)
	boot.Close()
	if err != nil && !isAlreadyExists(err) {
		s.log.Warn("recreate the crawler's database failed, retrying", zap.Error(err))
		return true
	}
	if err := s.migrate(ctx, Migrations()); err != nil {
		s.log.Warn("recreate the crawler's tables failed, retrying", zap.Error(err))
	}
	return true
}
