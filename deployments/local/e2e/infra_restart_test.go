package e2e_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
)

// pidWithArg returns the pid of the process whose command line holds arg
// (0 if none does).
func pidWithArg(t *testing.T, arg string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, a := range bytes.Split(b, []byte{0}) {
			if string(a) == arg {
				return pid
			}
		}
	}
	return 0
}

// TestLauncherRestartsItsInfra: the launcher's own ClickHouse dies
// (SIGKILL) a third into a crawl and its broker process exits (SIGTERM:
// the single-node development broker flushes its log when it stops) at
// two thirds. The launcher restarts each where it was, says so, counts no
// service exit meanwhile toward a crash loop, and the crawl drains with
// every page fetched once.
func TestLauncherRestartsItsInfra(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	site, err := demosite.Start(ctx, demosite.Config{Hosts: 3, PagesPerHost: 80, FirstHostOctet: 170})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	defer site.Close()
	dataDir := t.TempDir()
	args := []string{"--allow-private", "--delay", e2eDelay.String(), "--partitions", "8",
		"--data-dir", dataDir, "--timeout", "200s", "--broker-process"}
	for _, s := range site.Seeds() {
		args = append(args, "--seed", s)
	}
	want := len(site.ReachableAllowed())

	killed := make(chan string, 2)
	go func() {
		defer close(killed)
		faults := []struct {
			at  int
			arg string
			sig syscall.Signal
		}{
			{want / 3, "--config-file=" + filepath.Join(dataDir, "clickhouse", "config.xml"), syscall.SIGKILL},
			{want * 2 / 3, filepath.Join(dataDir, "kafka"), syscall.SIGTERM},
		}
		for _, f := range faults {
			select {
			case <-ctx.Done():
				return
			case <-whenPages(ctx, site, f.at):
			}
			pid := pidWithArg(t, f.arg)
			if pid == 0 {
				killed <- "no process with " + f.arg
				return
			}
			if err := syscall.Kill(pid, f.sig); err != nil {
				killed <- err.Error()
				return
			}
			killed <- f.sig.String() + " " + f.arg
		}
	}()
	out, runErr := runLauncher(t, ctx, args, filepath.Join(t.TempDir(), "out"), nil)
	var faults []string
	for f := range killed {
		faults = append(faults, f)
	}
	t.Logf("faults: %v\nlauncher output:\n%s", faults, out)
	if runErr != nil {
		t.Fatalf("launcher: %v", runErr)
	}
	if len(faults) != 2 || !strings.HasPrefix(faults[0], "killed") || !strings.HasPrefix(faults[1], "terminated") {
		t.Fatalf("faults %v, want ClickHouse killed and the broker terminated", faults)
	}
	for _, line := range []string{"clickhouse exited on its own", "clickhouse is back on", "broker exited", "the services wait for it"} {
		if !strings.Contains(out, line) {
			t.Errorf("the launcher did not say %q", line)
		}
	}
	if strings.Contains(out, "crash loop") {
		t.Error("a crash loop was reported")
	}
	if dups := checkCoverage(t, site, false); dups > 0 {
		t.Logf("%d pages fetched twice", dups)
	}
	if gap, where := minGapPerHost(site.Requests()); gap < e2eDelay-jitter {
		t.Errorf("two requests to %s %s apart, want at least %s", where, gap, e2eDelay)
	}
}
