package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/testkit/disktest"
)

// fullDisk fills the volume that holds the test's broker and ClickHouse
// (startOutageEnvOn) and frees it again. While it is full the broker
// answers produce requests with errors and ClickHouse fails its inserts;
// the dependency is named for the broker, the wait the services' gauges
// show first (every record a service handles is produced).
func (e *webEnv) fullDisk(volume string) dependency {
	filler := filepath.Join(volume, "filler")
	return dependency{
		name:  "kafka",
		stop:  func() error { disktest.Fill(e.t, filler); return nil },
		start: func(context.Context) error { return os.Remove(filler) },
	}
}

// TestDiskFull crawls a generated web with the data of the broker and of
// ClickHouse on a small volume, which is full for 10 s at about 30% of
// the pages. No service may exit (the parser did, on the broker's first
// error, and its restarts failed on the full disk until the launcher gave
// up): each waits, says so and resumes once space is freed, and the crawl
// drains with every page fetched, once, as after an outage
// (checkOutages).
func TestDiskFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	vol := disktest.SmallVolume(t, "512m")
	e := startOutageEnvOn(t, ctx, 69, vol)
	e.waitPages(ctx, e.web.Pages()*3/10)
	o := e.dependencyOutage(ctx, e.fullDisk(vol), "broker and ClickHouse disk full", 10*time.Second, 1)
	checkOutages(t, ctx, e, "kafka", []outage{o})
}
