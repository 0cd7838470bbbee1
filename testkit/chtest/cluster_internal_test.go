package chtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestIsDDLHang: only the timeout of a distributed DDL task (the error
// 18.16 gave when an ALTER ON CLUSTER hung, as the suite saw it) starts a
// fresh cluster; another error, a cut context included, fails the test.
func TestIsDDLHang(t *testing.T) {
	hang := errors.New("apply migration 204 (warc_files) statement 3: code: 159, message: Watching task /clickhouse/task_queue/ddl/query-0000000048 is executing longer than distributed_ddl_task_timeout (=180) seconds. There are 1 unfinished hosts (1 of them are currently active), they are going to execute the query in background")
	if !isDDLHang(fmt.Errorf("migrate: %w", hang)) {
		t.Error("the DDL timeout is not taken for the hang")
	}
	for _, err := range []error{
		context.DeadlineExceeded,
		errors.New("code: 159, message: Timeout exceeded: elapsed 30 seconds"),
		errors.New("code: 57, message: Table crawler.fetch_log_local already exists"),
	} {
		if isDDLHang(err) {
			t.Errorf("%v taken for the DDL hang", err)
		}
	}
}
