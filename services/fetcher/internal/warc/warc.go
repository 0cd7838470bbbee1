// Package warc archives what the fetcher fetched as WARC/1.1 files (ISO
// 28500), written with github.com/nlnwa/gowarc: per fetch a request and a
// response record (revisit for a 304 or a payload already archived,
// resource for FTP) and a metadata record; a warcinfo record per file.
//
// Files are gzip per record, named <prefix>-<timestamp>-<serial>-<instance>
// .warc.gz, written under a temporary name (.open) and renamed when closed
// (by size, by age, at shutdown). Each closed file gets a CDXJ index beside
// it (<file>.cdxj) and a row in warc_files. Archive returns once the
// fetch's records are written to the file, so a fetch acknowledged after
// it is in the archive. A crash leaves at most .open files: the next Open
// truncates each to its last complete record and closes it (or removes it
// when nothing of a fetch is left), and reports it.
package warc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// Defaults of Options.
const (
	DefaultPrefix      = "trawl"
	DefaultMaxFileSize = 1 << 30
	DefaultMaxFileAge  = time.Hour
	DefaultMaxDigests  = 100_000
)

// File name parts.
const (
	openSuffix  = ".open"
	warcSuffix  = ".warc.gz"
	indexSuffix = ".cdxj"
)

// Options configures a Writer.
type Options struct {
	Dir         string        // directory of the files; one fetcher process per directory (locked)
	Prefix      string        // file name prefix (default "trawl")
	Instance    string        // the fetcher's instance id, in file names and warcinfo
	MaxFileSize int64         // a file is closed after the fetch that takes it to this size (default 1 GiB)
	MaxFileAge  time.Duration // a file is closed this long after it was opened (default 1h)
	// MaxDigests bounds the payload digests (and as many attempts)
	// remembered for revisit records and duplicate counts (default
	// 100000, about 20 MB; negative: none, no revisit for a payload).
	MaxDigests int
	// Fsync makes every fetch's records durable on disk (fsync) before
	// Archive returns; without it they are written to the operating
	// system, which survives a crash of the process but not of the machine.
	Fsync bool
	// MaxBodyBytes is the fetcher's body cap: record blocks up to it stay
	// in memory while built.
	MaxBodyBytes int64
	UserAgent    string                      // for warcinfo
	Specs        func() []*crawlv1.CrawlSpec // crawl specs named in each file's warcinfo; nil: none
	Now          func() time.Time            // default time.Now
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	if o.MaxFileAge <= 0 {
		o.MaxFileAge = DefaultMaxFileAge
	}
	if o.MaxDigests == 0 {
		o.MaxDigests = DefaultMaxDigests
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = httpfetch.DefaultMaxBodyBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	switch {
	case o.Dir == "":
		return errors.New("warc: a directory is required")
	case o.Instance == "":
		return errors.New("warc: an instance id is required")
	case strings.ContainsAny(o.Prefix, "/\\"):
		return fmt.Errorf("warc: prefix %q must not contain a path separator", o.Prefix)
	}
	return nil
}

// gowarcMu serializes what makes gowarc record options (see Archive).
var gowarcMu sync.Mutex

// FileLister lists closed WARC files (chstore.BatchWriter of warc_files).
// Write blocks until the rows are durable; safe for concurrent use.
type FileLister interface {
	Write(ctx context.Context, rows ...rows.WarcFileRow) error
}

// Writer archives fetches. Archive is safe for concurrent use; Run owns
// the rotation by age and the indexing of closed files, and closes the
// files when its context ends.
type Writer struct {
	opts    Options
	log     *zap.Logger
	m       *metrics
	files   FileLister
	gw      *gowarc.WarcFileWriter
	recOpts []gowarc.WarcRecordOption
	lock    *os.File

	digests  *memory[revisitTarget]
	attempts *memory[struct{}]

	mu       sync.Mutex
	opened   map[string]time.Time // open file's path → opened at
	closed   []closedFile         // closed files not indexed yet
	notify   chan struct{}        // a file was closed
	stopping atomic.Bool

	rotateMu sync.Mutex
	rotated  string // the last file closed for its size
}

// closedFile is a file to index and list.
type closedFile struct {
	path      string
	recovered bool
}

// Open recovers the files a crashed process left in o.Dir and returns a
// Writer; files closed and recovered are indexed and listed by Run.
func Open(o Options, files FileLister, log *zap.Logger, reg prometheus.Registerer) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create warc directory: %w", err)
	}
	lock, err := lockDir(o.Dir)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	w := &Writer{
		opts:     o,
		log:      log,
		m:        m,
		files:    files,
		lock:     lock,
		digests:  newMemory[revisitTarget](o.MaxDigests),
		attempts: newMemory[struct{}](DefaultMaxDigests),
		opened:   make(map[string]time.Time),
		notify:   make(chan struct{}, 1),
		recOpts: []gowarc.WarcRecordOption{
			gowarc.WithAddMissingDigest(true),
			gowarc.WithDefaultDigestAlgorithm("sha1"),
			gowarc.WithBufferMaxMemBytes(o.MaxBodyBytes + 256<<10),
		},
	}
	if err := w.recoverDir(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	w.gw = gowarc.NewWarcFileWriter(
		gowarc.WithFileNameGenerator(&names{dir: o.Dir, prefix: o.Prefix, instance: safeName(o.Instance), now: o.Now}),
		gowarc.WithCompression(true),
		gowarc.WithCompressedFileSuffix(".gz"),
		gowarc.WithOpenFileSuffix(openSuffix),
		// Size rotation is Archive's, between fetches: gowarc's would
		// split one fetch's records over two files.
		gowarc.WithMaxFileSize(0),
		gowarc.WithMaxConcurrentWriters(1),
		gowarc.WithFlush(o.Fsync),
		gowarc.WithAddWarcConcurrentToHeader(true),
		gowarc.WithRecordOptions(w.recOpts...),
		gowarc.WithWarcInfoFunc(w.warcinfo),
		gowarc.WithBeforeFileCreationHook(w.fileOpened),
		gowarc.WithAfterFileCreationHook(w.fileClosed),
	)
	return w, nil
}

// Release gives up a Writer that will not Run (its owner failed to start):
// the lock on its directory. Run releases it otherwise.
func (w *Writer) Release() { _ = w.lock.Close() }

// Archive writes the records of the fetch of req answered by res and
// returns the file and offset of its response (revisit, resource) record.
// A fetch without an answer (res.Exchange nil: DNS, connect, robots
// refusals) has nothing to archive: "" and 0. Blocks until the records are
// written (with Options.Fsync, on disk).
func (w *Writer) Archive(_ context.Context, req *crawlv1.FetchRequest, res *httpfetch.Response) (file string, offset int64, err error) {
	if res == nil || res.Exchange == nil {
		return "", 0, nil
	}
	if w.stopping.Load() {
		return "", 0, errors.New("archive: writer closed")
	}
	// gowarc sets a package variable each time it makes record options
	// (uuid.EnableRandPool), here and in its writer's warcinfo: building
	// and writing are serialized (gowarc's single writer serializes the
	// writes anyway).
	gowarcMu.Lock()
	b, err := w.build(req, res)
	if err != nil {
		gowarcMu.Unlock()
		w.m.errors.Inc()
		return "", 0, err
	}
	defer b.close()
	key := attemptKey(req)
	if _, dup := w.attempts.get(key); dup {
		w.m.duplicates.Inc() // a re-delivered attempt archived again: harmless
	}
	resps := w.gw.Write(b.recs...)
	if len(resps) != len(b.recs) {
		gowarcMu.Unlock()
		w.m.errors.Inc()
		return "", 0, errors.New("archive: writer closed")
	}
	for _, r := range resps {
		if r.Err != nil {
			// The file may end in part of a record now: close it before
			// anything else is written to it (its index cuts it after
			// its last complete fetch; this one is not acknowledged).
			if err := w.gw.Rotate(); err != nil {
				w.log.Warn("close warc file after a failed write, next write retries", zap.Error(err))
			}
			gowarcMu.Unlock()
			w.m.errors.Inc()
			return "", 0, fmt.Errorf("write warc records to %s: %w", r.FileName, r.Err)
		}
	}
	gowarcMu.Unlock()
	for _, r := range b.recs {
		w.m.records.WithLabelValues(r.Type().String()).Inc()
	}
	main := resps[b.main]
	w.attempts.put(key, struct{}{})
	if last := resps[len(resps)-1]; last.FileOffset >= w.opts.MaxFileSize {
		w.rotateFull(last.FileName)
	}
	if b.digest != "" {
		rec := b.recs[b.main]
		w.digests.put(b.digest, revisitTarget{id: rec.RecordId(), uri: req.GetUrl(),
			date: rec.WarcHeader().Get(gowarc.WarcDate)})
	}
	return main.FileName, main.FileOffset, nil
}

// Run closes files older than Options.MaxFileAge and indexes and lists
// every closed file. When ctx ends (after the last Archive), it closes the
// open files, indexes and lists them, and returns; a file it could not
// list is listed by the next start (its index is written only once it is
// listed).
func (w *Writer) Run(ctx context.Context) error {
	defer func() { _ = w.lock.Close() }()
	tick := time.NewTicker(max(w.opts.MaxFileAge/10, 10*time.Millisecond))
	defer tick.Stop()
	var failed error
	for {
		select {
		case <-ctx.Done():
			w.stopping.Store(true)
			if err := w.gw.Close(); err != nil {
				failed = errors.Join(failed, fmt.Errorf("close warc files: %w", err))
			}
			// Listing still works: the warc_files writer stops after this.
			return errors.Join(failed, w.indexClosed(context.WithoutCancel(ctx)))
		case <-tick.C:
			if w.dueForRotation() {
				if err := w.gw.Rotate(); err != nil {
					w.log.Warn("rotate warc files, retried next tick", zap.Error(err))
				}
			}
		case <-w.notify:
		}
		if err := w.indexClosed(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("index warc files, retried on the next close", zap.Error(err))
		}
	}
}

// rotateFull closes the file name, full, unless it was closed already
// (concurrent fetches find it full together). The next fetch opens a new
// file.
func (w *Writer) rotateFull(name string) {
	w.rotateMu.Lock()
	defer w.rotateMu.Unlock()
	if w.rotated == name {
		return
	}
	w.rotated = name
	if err := w.gw.Rotate(); err != nil {
		w.log.Warn("rotate full warc file, retried after the next fetch", zap.Error(err))
		w.rotated = ""
	}
}

// dueForRotation reports whether an open file is older than MaxFileAge.
func (w *Writer) dueForRotation() bool {
	now := w.opts.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.opened {
		if now.Sub(at) >= w.opts.MaxFileAge {
			return true
		}
	}
	return false
}

// fileOpened (gowarc hook, on its writer goroutine) notes when path was
// opened.
func (w *Writer) fileOpened(path string) error {
	w.mu.Lock()
	w.opened[strings.TrimSuffix(path, openSuffix)] = w.opts.Now()
	w.mu.Unlock()
	return nil
}

// fileClosed (gowarc hook, on its writer goroutine) queues the closed file
// for Run; it never blocks.
func (w *Writer) fileClosed(path string, _ int64, _ string) error {
	w.mu.Lock()
	delete(w.opened, path)
	w.closed = append(w.closed, closedFile{path: path})
	w.mu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
	return nil
}

// indexClosed indexes and lists the files closed so far; a file that
// fails stays queued.
func (w *Writer) indexClosed(ctx context.Context) error {
	w.mu.Lock()
	todo := w.closed
	w.closed = nil
	w.mu.Unlock()
	var errs error
	for i, f := range todo {
		if err := w.indexAndList(ctx, f); err != nil {
			w.mu.Lock()
			w.closed = append(w.closed, todo[i:]...)
			w.mu.Unlock()
			return errors.Join(errs, err)
		}
	}
	return errs
}

// indexAndList reads the closed file at f.path, lists it in warc_files and
// then writes its CDXJ index beside it (a file without an index is
// re-listed by the next start: the listing is idempotent).
func (w *Writer) indexAndList(ctx context.Context, f closedFile) error {
	ix, err := indexFile(f.path, f.recovered)
	if errors.Is(err, errDamaged) {
		// A write failed mid-record (a full disk): keep what is whole.
		c, cerr := cutAfterLastFetch(f.path)
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		w.m.recovered.WithLabelValues("cut").Inc()
		w.log.Warn("cut a damaged warc file after its last complete fetch", zap.String("file", filepath.Base(f.path)),
			zap.Int("fetches", c.fetches), zap.Int64("cut_bytes", c.size-c.keep), zap.NamedError("cut", err))
		if c.fetches == 0 {
			return nil // removed
		}
		f.recovered = true
		ix, err = indexFile(f.path, true)
	}
	if err != nil {
		return err
	}
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("stat warc file: %w", err)
	}
	row := rows.WarcFileRow{
		File: filepath.Base(f.path), Dir: w.opts.Dir, Fetcher: w.opts.Instance,
		OpenedAt: ix.opened, ClosedAt: w.opts.Now().Truncate(time.Second), Bytes: uint64(st.Size()),
		Records: uint32(ix.records), Responses: uint32(ix.responses), Revisits: uint32(ix.revisits), Recovered: f.recovered,
	}
	if w.files != nil {
		if err := w.files.Write(ctx, row); err != nil {
			return fmt.Errorf("list warc file %s: %w", row.File, err)
		}
	}
	if err := writeIndex(f.path+indexSuffix, ix.lines); err != nil {
		return err
	}
	w.m.filesClosed.Inc()
	w.m.fileBytes.Add(float64(st.Size()))
	w.log.Info("closed warc file", zap.String("file", row.File), zap.Int("records", ix.records),
		zap.Int64("bytes", st.Size()), zap.Bool("recovered", f.recovered))
	return nil
}

// warcinfo fills each file's warcinfo record: the crawler, its version,
// the user agent and the crawl specifications known when it was opened.
func (w *Writer) warcinfo(rb gowarc.WarcRecordBuilder) error {
	var b strings.Builder
	fmt.Fprintf(&b, "software: trawl-fetcher/%s\r\n", version())
	b.WriteString("format: WARC File Format 1.1\r\n")
	b.WriteString("conformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n")
	fmt.Fprintf(&b, "fetcher: %s\r\n", w.opts.Instance)
	if host, err := os.Hostname(); err == nil {
		fmt.Fprintf(&b, "hostname: %s\r\n", host)
	}
	if w.opts.UserAgent != "" {
		fmt.Fprintf(&b, "http-header-user-agent: %s\r\n", w.opts.UserAgent)
	}
	b.WriteString("robots: obey\r\n")
	if w.opts.Specs != nil {
		for _, s := range w.opts.Specs() {
			js, err := protojson.Marshal(s)
			if err != nil {
				continue
			}
			fmt.Fprintf(&b, "isPartOf: %s\r\ncrawl-spec: %s\r\n", s.GetCrawlId(), js)
		}
	}
	_, err := rb.WriteString(b.String())
	return err
}

// version is the module version and VCS revision the binary was built
// from.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += "+" + s.Value
		}
	}
	return v
}

// names generates file names <prefix>-<timestamp>-<serial>-<instance>.warc
// (gowarc appends .gz, and .open while the file is written).
type names struct {
	dir, prefix, instance string
	now                   func() time.Time
	serial                atomic.Int64
}

// NewWarcfileName implements gowarc.WarcFileNameGenerator.
func (n *names) NewWarcfileName() (string, string) {
	return n.dir, fmt.Sprintf("%s-%s-%05d-%s.warc", n.prefix, n.now().UTC().Format("20060102150405"),
		n.serial.Add(1), n.instance)
}

// safeName keeps letters, digits, '.', '_' and '-' of an instance id for
// a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}
