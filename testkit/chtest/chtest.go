// Package chtest gives tests a real ClickHouse: the server at
// CRAWLER_CLICKHOUSE_ADDR when set, otherwise a private server started for
// the test binary (chlocal). Each test gets its own database.
package chtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

// EnvAddr names the environment variable with the address of an existing
// server (native protocol host:port) to use instead of a private one.
const EnvAddr = "CRAWLER_CLICKHOUSE_ADDR"

// The server of this test binary, set once by Main. A package variable is
// the only way to hand TestMain's server to the tests.
var (
	mu   sync.Mutex
	addr string
)

// Main wraps testing.M: call from TestMain as os.Exit(chtest.Main(m)). It
// starts a private server if needed and stops it after the tests.
//
// When no server is reachable and no clickhouse binary is installed, Main
// prints what to install and returns 1: tests are never skipped silently.
func Main(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	a, stop, err := server(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chtest: %v\n", err)
		return 1
	}
	mu.Lock()
	addr = a
	mu.Unlock()
	code := m.Run()
	stop()
	return code
}

// MainLeakChecked is Main for a package whose tests start goroutines: when
// the tests pass, goleak then checks that none of them is left running
// (goleak retries for a while, which covers goroutines that are exiting).
// Call it from TestMain as os.Exit(chtest.MainLeakChecked(m)).
func MainLeakChecked(m *testing.M, opts ...goleak.Option) int {
	code := Main(m)
	if code != 0 {
		return code
	}
	if err := goleak.Find(opts...); err != nil {
		fmt.Fprintf(os.Stderr, "goleak: goroutines left running after the tests: %v\n", err)
		return 1
	}
	return 0
}

// server returns the address of a reachable server and how to stop it.
func server(ctx context.Context) (string, func(), error) {
	if a := os.Getenv(EnvAddr); a != "" {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := chlocal.Ping(pctx, a)
		cancel()
		if err == nil {
			return a, func() {}, nil
		}
		fmt.Fprintf(os.Stderr, "chtest: %s=%s does not answer (%v); starting a private server\n", EnvAddr, a, err)
	}
	if _, err := chlocal.FindBinary(); err != nil {
		return "", nil, fmt.Errorf("%w\n"+
			"chtest needs a real ClickHouse server. Either install one:\n"+
			"    sudo apt-get install -y clickhouse-server   (Debian/Ubuntu; any binary named clickhouse-server or clickhouse on PATH works)\n"+
			"or point the tests at a running server:\n"+
			"    export %s=127.0.0.1:9000", err, EnvAddr)
	}
	dir, err := os.MkdirTemp("", "chtest-")
	if err != nil {
		return "", nil, fmt.Errorf("create server dir: %w", err)
	}
	// The data is thrown away: no need to wait long for a graceful stop.
	srv, err := chlocal.StartWith(ctx, dir, chlocal.Options{StopTimeout: 2 * time.Second})
	if err != nil {
		_ = os.RemoveAll(dir) // best effort: the start error is the one to report
		return "", nil, fmt.Errorf("start private clickhouse: %w", err)
	}
	return srv.Addr(), func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "chtest: stop clickhouse: %v\n", err)
		}
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "chtest: remove server dir: %v\n", err)
		}
	}, nil
}

// Addr returns the native address of the test server.
func Addr(t testing.TB) string {
	t.Helper()
	mu.Lock()
	a := addr
	mu.Unlock()
	if a == "" {
		t.Fatal("chtest: no ClickHouse server: call os.Exit(chtest.Main(m)) from this package's TestMain")
	}
	return a
}

// Config returns a chstore.Config for a fresh, uniquely named database
// (dropped when the test ends).
func Config(t testing.TB) chstore.Config {
	t.Helper()
	a := Addr(t)
	c := chstore.Config{
		Addr:        []string{a},
		Database:    DatabaseName(t.Name()),
		Username:    "default",
		DialTimeout: 5 * time.Second,
	}
	t.Cleanup(func() {
		if err := dropDatabase(a, c.Database); err != nil {
			t.Errorf("chtest: drop database %s: %v", c.Database, err)
		}
	})
	return c
}

// NewStore opens and migrates a fresh database for the test; it is closed
// when the test ends.
func NewStore(t testing.TB) *chstore.Store {
	t.Helper()
	return OpenMigrated(t, Config(t))
}

// OpenMigrated opens a store on c's database and applies the schema's
// migrations; it is closed when the test ends.
func OpenMigrated(t testing.TB, c chstore.Config) *chstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := chstore.Open(ctx, c, zap.NewNop())
	if err != nil {
		t.Fatalf("chtest: open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("chtest: close store: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("chtest: migrate: %v", err)
	}
	return s
}

// DatabaseName returns a unique database name derived from a test name:
// "t_" + the name's letters, digits and underscores (at most 40) + "_" + 8
// random hex digits.
func DatabaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	return "t_" + b.String() + "_" + hex.EncodeToString(rnd[:])
}

func dropDatabase(addr, db string) error {
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: "default", Username: "default"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return conn.Exec(ctx, "DROP DATABASE IF EXISTS `"+db+"`")
}
