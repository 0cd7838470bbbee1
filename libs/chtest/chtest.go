// Package chtest gives tests a real ClickHouse: the server at
// CRAWLER_CLICKHOUSE_ADDR when set, otherwise a private server started for
// the test binary (chlocal). Each test gets its own database.
package chtest

import (
	"testing"

	"github.com/trawl-crawler/trawl/libs/chstore"
)

// Main wraps testing.M: call from TestMain as os.Exit(chtest.Main(m)). It
// starts a private server if needed and stops it after the tests.
func Main(m *testing.M) int { panic("unimplemented") }

// Addr returns the native address of the test server.
func Addr(t testing.TB) string { panic("unimplemented") }

// Config returns a chstore.Config for a fresh, uniquely named database
// (dropped when the test ends).
func Config(t testing.TB) chstore.Config { panic("unimplemented") }

// NewStore opens and migrates a fresh database for the test.
func NewStore(t testing.TB) *chstore.Store { panic("unimplemented") }
