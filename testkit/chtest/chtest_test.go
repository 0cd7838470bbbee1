package chtest_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/testkit/chtest"
)

func TestMain(m *testing.M) { os.Exit(chtest.Main(m)) }

func TestDatabaseName(t *testing.T) {
	valid := regexp.MustCompile(`^t_[a-z0-9_]{0,40}_[0-9a-f]{8}$`)
	tests := []struct {
		name, testName, prefix string
	}{
		{"plain", "TestX", "t_testx_"},
		{"subtest", "TestX/sub case-1", "t_testx_sub_case_1_"},
		{"unicode", "Test/é", "t_test___"},
		{"long", strings.Repeat("a", 100), "t_" + strings.Repeat("a", 40) + "_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := chtest.DatabaseName(tt.testName)
			if !valid.MatchString(got) || !strings.HasPrefix(got, tt.prefix) {
				t.Errorf("DatabaseName(%q) = %q, want %s<8 hex>", tt.testName, got, tt.prefix)
			}
			if again := chtest.DatabaseName(tt.testName); again == got {
				t.Errorf("DatabaseName is not unique: %q twice", got)
			}
		})
	}
}

// TestNewStoreIsolated: each test's store has its own migrated database,
// dropped when the test ends.
func TestNewStoreIsolated(t *testing.T) {
	var db string
	t.Run("inner", func(t *testing.T) {
		s := chtest.NewStore(t)
		db = s.Database()
		if err := s.Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	s := chtest.NewStore(t)
	if s.Database() == db {
		t.Fatalf("two tests share database %s", db)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var n uint64
	if err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.databases WHERE name = ?", db).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s of a finished test still exists", db)
	}
}
