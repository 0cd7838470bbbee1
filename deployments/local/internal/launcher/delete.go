package launcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/results"
	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/kafkaembed"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/warcdir"
	"github.com/trawl-crawler/trawl/services/seeder/crawlspec"
)

// `crawl delete ID` deletes a crawl of a data directory that no crawl
// runs on (a running crawl is deleted from its console or its API): what
// DELETE /v1/crawls/{id} and the fetchers do, done on the data
// directory's files.
//
//   - The control topic of the embedded broker (<data-dir>/kafka, when
//     present) gets the crawl's deleting revision (crawlspec.Delete), so
//     that a later run's services treat it as deleted: its URLs left in
//     the topics are dropped, the fetchers remove any file of it, the
//     seeder's sweep removes rows that land.
//   - Its record (<data-dir>/crawls/<id>.json) is marked deleted: no run
//     resumes it, and --crawl-id with its id is refused.
//   - Its rows go from every ClickHouse table that holds rows of crawls
//     (chstore.DeleteCrawlRows, as the API), warc_files included; the
//     command waits (--wait) until ClickHouse has removed them.
//   - Its WARC files and their CDXJ indexes go from every fetcher's
//     directory (<data-dir>/warc/fetcher-<i>), by warcdir.RemoveCrawl as
//     the fetchers do; files of several crawls (written before a file held
//     one) are rewritten without its records and listed again.

// DeleteConfig is `crawl delete`.
type DeleteConfig struct {
	results.Source
	CrawlID string        // the one argument
	Wait    time.Duration // flag wait: how long ClickHouse may take to remove the rows
}

// DefaultDeleteWait is how long `crawl delete` waits for ClickHouse.
const DefaultDeleteWait = 5 * time.Minute

// RegisterFlags binds the fields to flags with defaults.
func (c *DeleteConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Source.RegisterFlags(fs)
	fs.DurationVar(&c.Wait, "wait", DefaultDeleteWait, "how long to wait for ClickHouse to remove the crawl's rows (it goes on in the background after)")
}

// Validate reports a configuration error.
func (c DeleteConfig) Validate() error {
	if !crawlspec.ValidCrawlID(c.CrawlID) {
		return fmt.Errorf("crawl id %q: want 1-64 letters, digits, '.', '_' or '-'", c.CrawlID)
	}
	if c.Wait <= 0 {
		return fmt.Errorf("wait: %v must be positive", c.Wait)
	}
	return c.Source.Validate()
}

// ErrNoSuchCrawl is returned (wrapped) by Delete for a crawl the data
// directory knows nothing of.
var ErrNoSuchCrawl = errors.New("no such crawl")

// Delete deletes cfg.CrawlID from its data directory and prints what it
// removed to stdout: rows per table, WARC files and bytes. Notes (the
// ClickHouse started for it) go to stderr. Repeating it removes what is
// left, if anything.
func Delete(ctx context.Context, cfg DeleteConfig, stdout, stderr io.Writer) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	id := cfg.CrawlID
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return fmt.Errorf("resolve data dir: %w", err)
	}
	if fi, err := os.Stat(dataDir); err != nil || !fi.IsDir() {
		return fmt.Errorf("data dir %s does not exist: give the launcher's --data-dir", dataDir)
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return err
	}
	defer unlock()
	records, err := readRecords(dataDir)
	if err != nil {
		return err
	}
	rec, known := findRecord(records, id)
	// The WARC directories first: a fetcher still writing one (a
	// pipeline of another launcher) refuses the lock.
	dirs, err := filepath.Glob(filepath.Join(dataDir, "warc", "fetcher-*"))
	if err != nil {
		return fmt.Errorf("find warc directories: %w", err)
	}
	var locks []*os.File
	defer func() {
		for _, l := range locks {
			_ = l.Close()
		}
	}()
	for _, d := range dirs {
		l, err := warcdir.Lock(d)
		if err != nil {
			return err
		}
		locks = append(locks, l)
	}

	src := cfg.Source
	src.DataDir = dataDir
	store, stop, err := results.Open(ctx, src, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	before, err := store.CrawlRows(ctx, id)
	if err != nil {
		return err
	}
	var tables []string
	for t, n := range before {
		if n > 0 {
			tables = append(tables, t)
		}
	}
	slices.Sort(tables)
	published, err := publishDeletion(ctx, dataDir, id, stderr)
	if err != nil {
		return err
	}
	if !known && len(tables) == 0 && !published && !hasFiles(dirs, id) {
		return fmt.Errorf("crawl %s: %w in %s (no record, no rows, no WARC file)", id, ErrNoSuchCrawl, dataDir)
	}
	if !known {
		rec = record{CrawlID: id}
	}
	if rec.Deleted.IsZero() {
		rec.Deleted = time.Now()
		if err := rec.write(dataDir); err != nil {
			return err
		}
	}

	// The files.
	var removed warcdir.Removal
	for _, d := range dirs {
		r, err := warcdir.RemoveCrawl(d, DefaultWarcPrefix, id)
		removed.Add(r)
		if err != nil {
			return err
		}
		if err := relist(ctx, store, d, r.Rewritten); err != nil {
			return err
		}
	}
	// The rows.
	if err := store.DeleteCrawlRows(ctx, id, tables); err != nil {
		return err
	}
	left, err := waitRows(ctx, store, id, cfg.Wait)
	if err != nil {
		return err
	}

	fmt.Fprintf(stdout, "deleted crawl %s", id)
	if published {
		fmt.Fprint(stdout, " (its deletion published on the control topic)")
	}
	fmt.Fprintln(stdout)
	if len(tables) == 0 {
		fmt.Fprintln(stdout, "rows: none left in ClickHouse")
	}
	for _, t := range tables {
		fmt.Fprintf(stdout, "rows: %-22s %d removed", t, before[t]-left[t])
		if left[t] > 0 {
			fmt.Fprintf(stdout, ", %d left (ClickHouse removes them in the background)", left[t])
		}
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "warc: %d files removed, %s\n", removed.Files, humanBytes(removed.RemovedBytes()))
	for _, rw := range removed.Rewritten {
		fmt.Fprintf(stdout, "warc: %s rewritten without its %d records (%s)\n", rw.File, rw.RemovedRecords, humanBytes(rw.RemovedBytes))
	}
	return nil
}

// DefaultWarcPrefix is the prefix of the fetchers' WARC file names (the
// launcher leaves --warc-prefix at its default).
const DefaultWarcPrefix = "trawl"

// hasFiles reports whether a directory of dirs holds a file of crawl id.
func hasFiles(dirs []string, id string) bool {
	for _, d := range dirs {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if c, ok := warcdir.CrawlOf(DefaultWarcPrefix, e.Name()); ok && c == id {
				return true
			}
		}
	}
	return false
}

// relist lists the rewritten files of dir again in warc_files (a later
// closed_at replaces their rows), keeping what their rows said of them
// besides.
func relist(ctx context.Context, store *chstore.Store, dir string, rws []warcdir.Rewrite) error {
	if len(rws) == 0 {
		return nil
	}
	b, err := store.Conn().PrepareBatch(ctx, "INSERT INTO warc_files ("+strings.Join(chstore.WarcFiles.Columns, ", ")+")")
	if err != nil {
		return fmt.Errorf("list rewritten warc files: %w", err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	for _, rw := range rws {
		row := chstore.WarcFileRow{File: rw.File, Dir: dir, Fetcher: filepath.Base(dir), OpenedAt: rw.Opened, ClosedAt: now,
			Bytes: uint64(rw.Bytes), Records: uint32(rw.Records), Responses: uint32(rw.Responses), Revisits: uint32(rw.Revisits)}
		var fetcher, listedDir string
		if err := store.Conn().QueryRow(ctx, "SELECT argMax(fetcher, closed_at), argMax(dir, closed_at) FROM warc_files WHERE file = ?", rw.File).
			Scan(&fetcher, &listedDir); err == nil && fetcher != "" {
			row.Fetcher, row.Dir = fetcher, listedDir
		}
		if err := b.Append(chstore.WarcFiles.Values(row)...); err != nil {
			return fmt.Errorf("list rewritten warc files: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("list rewritten warc files: %w", err)
	}
	return nil
}

// waitRows waits, at most wait, until no table holds a row of crawl id,
// and returns the rows left per table.
func waitRows(ctx context.Context, store *chstore.Store, id string, wait time.Duration) (map[string]uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		left, err := store.CrawlRows(ctx, id)
		if err != nil {
			if ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.Canceled) {
				return left, nil // waited long enough: the mutations go on
			}
			return nil, err
		}
		var n uint64
		for _, c := range left {
			n += c
		}
		if n == 0 {
			return left, nil
		}
		select {
		case <-ctx.Done():
			return left, nil
		case <-tick.C:
		}
	}
}

// publishDeletion publishes crawl id's deleting revision on the control
// topic of the data directory's embedded broker, started on its files for
// the purpose: it reports false when there is no broker data, no spec of
// the crawl, or the spec is deleted already.
func publishDeletion(ctx context.Context, dataDir, id string, stderr io.Writer) (bool, error) {
	dir := filepath.Join(dataDir, "kafka")
	if _, err := os.Stat(dir); err != nil {
		return false, nil
	}
	b, err := kafkaembed.Start(ctx, dir, "127.0.0.1:0")
	if err != nil {
		return false, err
	}
	defer b.Close()
	fmt.Fprintf(stderr, "started the data dir's broker on %s (stopped when done)\n", dir)
	// The pipeline's settings (pipeline.Start): its default topic prefix.
	kc := kafkaio.DefaultConfig()
	kc.Brokers, kc.TopicPrefix, kc.Partitions, kc.MaxMessageBytes = []string{b.Addr()}, "crawler.", DefaultPartitions, 16<<20
	specs := crawlcontrol.NewSpecs()
	fctx, stop := context.WithCancel(ctx)
	caught := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- crawlcontrol.FollowCaughtUp(fctx, kc, specs, func() { close(caught) }, nil)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil && ctx.Err() == nil {
			fmt.Fprintf(stderr, "control topic follower: %v\n", err)
		}
	}()
	wait := time.NewTimer(30 * time.Second)
	defer wait.Stop()
	select {
	case <-caught:
	case err := <-done:
		done <- err // for the deferred receive
		return false, fmt.Errorf("read the control topic: %w", err)
	case <-wait.C:
		return false, errors.New("read the control topic: not read to its end in 30s")
	case <-ctx.Done():
		return false, ctx.Err()
	}
	spec := specs.Get(id)
	if spec == nil || crawlcontrol.Deleted(spec) {
		return false, nil
	}
	next := crawlspec.Delete(spec, time.Now())
	w := kafkaio.NewWriter(kc, nil, nil)
	defer func() { _ = w.Close() }() // Write returned: the record is acknowledged
	m, err := crawlcontrol.Message(kc.Topics().Control, next)
	if err != nil {
		return false, err
	}
	if err := w.Write(ctx, m); err != nil {
		return false, fmt.Errorf("publish the deletion of crawl %s: %w", id, err)
	}
	return true, nil
}

// humanBytes is n in bytes, KiB or MiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// lockDataDir takes the data directory's lock (<data-dir>/.lock): a crawl
// holds it while it runs, `crawl delete` while it deletes. The lock goes
// with the process.
func lockDataDir(dataDir string) (func(), error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dataDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open data dir lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("data dir %s is in use by a crawl (stop it first; a running crawl is deleted from its console or API): %w", dataDir, err)
	}
	return func() { _ = f.Close() }, nil
}
