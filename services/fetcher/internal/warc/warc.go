// Package warc archives what the fetcher fetched as WARC/1.1 files (ISO
// 28500), written with github.com/nlnwa/gowarc: per fetch a request and a
// response record (revisit for a 304 or a payload already archived,
// resource for FTP) and a metadata record; a warcinfo record per file.
//
// A file holds one crawl's records: files are gzip per record, named
// <prefix>-<crawl>-<timestamp>-<serial>-<instance>.warc.gz (libs/warcdir
// names them), written under a temporary name (.open) and renamed when
// closed (by size, by age, when the crawl's file is the least recently
// used of more than Options.MaxOpenFiles, at shutdown). Each closed file
// gets a CDXJ index beside it (<file>.cdxj) and a row in warc_files.
// Archive returns once the fetch's records are written to the file, so a
// fetch acknowledged after it is in the archive. A crash leaves at most
// .open files: the next Open truncates each to its last complete record
// and closes it (or removes it when nothing of a fetch is left), and
// reports it. DeleteCrawl removes a deleted crawl's files (and rewrites
// files of the layout before, which mixed crawls, without its records).
package warc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
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
	"github.com/trawl-crawler/trawl/libs/warcdir"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// Defaults of Options.
const (
	DefaultPrefix      = "trawl"
	DefaultMaxFileSize = 1 << 30
	DefaultMaxFileAge  = time.Hour
	DefaultMaxDigests  = 100_000
	// DefaultMaxOpenFiles bounds the crawls with a file open at once:
	// each costs a file, a gzip writer (about 256 KiB at its largest)
	// and two goroutines of gowarc's writer.
	DefaultMaxOpenFiles = 16
	// DefaultMaxIndexBytes bounds the index lines of open files kept
	// in memory.
	DefaultMaxIndexBytes = 64 << 20
)

// gzipLevel is the DEFLATE level of the records' gzip members
// (klauspost/compress): level 1 takes about half the time of the default
// (6) on 20 KB pages and writes about 7 % more bytes (README).
const gzipLevel = 1

// File name parts (libs/warcdir's).
const (
	openSuffix  = warcdir.OpenSuffix
	warcSuffix  = warcdir.WarcSuffix
	indexSuffix = warcdir.IndexSuffix
)

// Options configures a Writer.
type Options struct {
	Dir         string        // directory of the files; one fetcher process per directory (locked)
	Prefix      string        // file name prefix (default "trawl")
	Instance    string        // the fetcher's instance id, in file names and warcinfo
	MaxFileSize int64         // a file is closed after the fetch that takes it to this size (default 1 GiB)
	MaxFileAge  time.Duration // a file is closed this long after it was opened (default 1h)
	// MaxOpenFiles bounds the files open at once, one per crawl: a crawl
	// archiving while as many others have a file open closes the least
	// recently used one first (default DefaultMaxOpenFiles).
	MaxOpenFiles int
	// MaxDigests bounds the payload digests (and as many attempts)
	// remembered for revisit records and duplicate counts (default
	// 100000, about 20 MB; negative: none, no revisit for a payload).
	MaxDigests int
	// Fsync makes every fetch's records durable on disk (fsync) before
	// Archive returns; without it they are written to the operating
	// system, which survives a crash of the process but not of the machine.
	Fsync bool
	// MaxIndexBytes bounds the CDXJ lines of open files kept in memory
	// until their files close (default 64 MiB, about 250000 fetches): a
	// file whose lines would pass it is read again to be indexed.
	MaxIndexBytes int64
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
	if o.MaxOpenFiles <= 0 {
		o.MaxOpenFiles = DefaultMaxOpenFiles
	}
	if o.MaxIndexBytes <= 0 {
		o.MaxIndexBytes = DefaultMaxIndexBytes
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

// gowarcMu serializes what makes gowarc record options (see Archive), and
// guards every Writer's open files (Writer.crawls) and deleted crawls.
var gowarcMu sync.Mutex

// FileLister lists closed WARC files (chstore.BatchWriter of warc_files).
// Write blocks until the rows are durable; safe for concurrent use.
type FileLister interface {
	Write(ctx context.Context, rows ...rows.WarcFileRow) error
}

// Writer archives fetches. Archive and DeleteCrawl are safe for concurrent
// use; Run owns the rotation by age and the indexing of closed files, and
// closes the files when its context ends.
type Writer struct {
	opts    Options
	log     *zap.Logger
	m       *metrics
	files   FileLister
	recOpts []gowarc.WarcRecordOption
	lock    *os.File

	digests  *memory[revisitTarget]
	attempts *memory[struct{}]

	// Under gowarcMu: the open file of each crawl (at most
	// Options.MaxOpenFiles), uses to order them by their last use, and
	// the crawls deleted (DeleteCrawl: never archived again; one entry
	// per deleted crawl, as the control topic keeps their specs).
	crawls  map[string]*crawlFile
	uses    uint64
	deleted map[string]bool

	// indexMu is held while closed files are indexed and while a crawl's
	// files are removed, so that no file is listed as it goes.
	indexMu sync.Mutex

	mu       sync.Mutex
	opened   map[string]time.Time // crawl of an open file → opened at
	closed   []closedFile         // closed files not indexed yet
	notify   chan struct{}        // a file was closed
	stopping atomic.Bool
	serial   atomic.Int64 // of the file names
	// indexBytes is the size of the liveIndex lines not written yet.
	indexBytes atomic.Int64
}

// crawlFile is the gowarc writer of one crawl's file.
type crawlFile struct {
	gw   *gowarc.WarcFileWriter
	used uint64 // Writer.uses at its last Archive
	// The index of the open file and when it was opened, set by Archive
	// and gowarc's hooks (on its writer goroutine, while Archive or
	// closeCrawl waits for it under gowarcMu).
	ix       *liveIndex
	openedAt time.Time
}

// closedFile is a file to index and list.
type closedFile struct {
	path      string
	recovered bool
	ix        *liveIndex // its index made while it was written; nil: read it
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
	lock, err := warcdir.Lock(o.Dir)
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
		crawls:   make(map[string]*crawlFile),
		deleted:  make(map[string]bool),
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
	if len(w.closed) > 0 {
		w.notify <- struct{}{} // Run indexes them at once
	}
	return w, nil
}

// fileFor returns the writer of crawl's file, made (not opened: gowarc
// opens the file at the first write) after closing the least recently
// used crawl's file when Options.MaxOpenFiles are open. The caller holds
// gowarcMu.
func (w *Writer) fileFor(crawl string) *crawlFile {
	w.uses++
	if cf := w.crawls[crawl]; cf != nil {
		cf.used = w.uses
		return cf
	}
	if len(w.crawls) >= w.opts.MaxOpenFiles {
		lru := ""
		for id, cf := range w.crawls { // at most MaxOpenFiles
			if lru == "" || cf.used < w.crawls[lru].used {
				lru = id
			}
		}
		w.closeCrawl(lru)
		w.m.evicted.Inc()
	}
	cf := &crawlFile{used: w.uses}
	cf.gw = gowarc.NewWarcFileWriter(
		gowarc.WithFileNameGenerator(&names{dir: w.opts.Dir, prefix: w.opts.Prefix, crawl: crawl,
			instance: safeName(w.opts.Instance), now: w.opts.Now, serial: &w.serial}),
		gowarc.WithCompression(true),
		gowarc.WithCompressionLevel(gzipLevel),
		gowarc.WithCompressedFileSuffix(".gz"),
		gowarc.WithOpenFileSuffix(openSuffix),
		// Size rotation is Archive's, between fetches: gowarc's would
		// split one fetch's records over two files.
		gowarc.WithMaxFileSize(0),
		gowarc.WithMaxConcurrentWriters(1),
		gowarc.WithFlush(w.opts.Fsync),
		gowarc.WithAddWarcConcurrentToHeader(true),
		gowarc.WithRecordOptions(w.recOpts...),
		gowarc.WithWarcInfoFunc(func(rb gowarc.WarcRecordBuilder) error { return w.warcinfo(rb, crawl) }),
		gowarc.WithBeforeFileCreationHook(func(string) error {
			cf.openedAt = time.Now() // the warcinfo record's date, to the second (gowarc's clock)
			return w.fileOpened(crawl)
		}),
		gowarc.WithAfterFileCreationHook(func(path string, _ int64, _ string) error {
			ix := cf.ix
			cf.ix = nil
			return w.fileClosed(crawl, path, ix)
		}),
	)
	w.crawls[crawl] = cf
	return cf
}

// closeCrawl closes crawl's file, if one is open, and forgets its writer
// (its goroutines end). The caller holds gowarcMu.
func (w *Writer) closeCrawl(crawl string) {
	cf := w.crawls[crawl]
	if cf == nil {
		return
	}
	delete(w.crawls, crawl)
	_ = cf.gw.Close()  // gowarc reports no error: a file that did not close whole is cut when indexed
	w.dropIndex(cf.ix) // its file did not close (gowarc's hook takes it otherwise)
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
	// gowarc sets a package variable each time it makes record options
	// (uuid.EnableRandPool), here and in its writer's warcinfo: building
	// and writing are serialized (gowarc's single writer serializes the
	// writes anyway).
	gowarcMu.Lock()
	if w.stopping.Load() {
		gowarcMu.Unlock()
		return "", 0, errors.New("archive: writer closed")
	}
	crawl := req.GetCrawlId()
	if w.deleted[crawl] {
		// Fetched after the crawl's deletion (in flight then): its
		// records would outlive it.
		gowarcMu.Unlock()
		w.m.skippedDeleted.Inc()
		return "", 0, nil
	}
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
	cf := w.fileFor(crawl)
	resps := cf.gw.Write(b.recs...)
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
			w.dropIndex(cf.ix)
			if err := cf.gw.Rotate(); err != nil {
				w.log.Warn("close warc file after a failed write, next write retries", zap.Error(err))
			}
			gowarcMu.Unlock()
			w.m.errors.Inc()
			return "", 0, fmt.Errorf("write warc records to %s: %w", r.FileName, r.Err)
		}
	}
	w.indexFetch(cf, req.GetUrl(), &b, resps)
	if last := resps[len(resps)-1]; last.FileOffset >= w.opts.MaxFileSize {
		// Full: the crawl's next fetch opens a new file.
		if err := cf.gw.Rotate(); err != nil {
			w.log.Warn("rotate full warc file, retried after the next fetch", zap.Error(err))
		}
	}
	gowarcMu.Unlock()
	for _, r := range b.recs {
		w.m.records.WithLabelValues(r.Type().String()).Inc()
	}
	main := resps[b.main]
	w.attempts.put(key, struct{}{})
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
			gowarcMu.Lock()
			w.stopping.Store(true)
			for crawl := range w.crawls {
				w.closeCrawl(crawl)
			}
			gowarcMu.Unlock()
			// Listing still works: the warc_files writer stops after this.
			return errors.Join(failed, w.indexClosed(context.WithoutCancel(ctx)))
		case <-tick.C:
			if due := w.dueForRotation(); len(due) > 0 {
				gowarcMu.Lock()
				for _, crawl := range due {
					w.closeCrawl(crawl)
				}
				gowarcMu.Unlock()
			}
		case <-w.notify:
		}
		if err := w.indexClosed(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("index warc files, retried on the next close", zap.Error(err))
		}
	}
}

// dueForRotation returns the crawls whose open file is older than
// MaxFileAge (closed then: a crawl that archives again opens a new one).
func (w *Writer) dueForRotation() []string {
	now := w.opts.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var due []string
	for crawl, at := range w.opened {
		if now.Sub(at) >= w.opts.MaxFileAge {
			due = append(due, crawl)
		}
	}
	return due
}

// fileOpened (gowarc hook, on its writer goroutine) notes when crawl's
// file was opened.
func (w *Writer) fileOpened(crawl string) error {
	w.mu.Lock()
	w.opened[crawl] = w.opts.Now()
	w.mu.Unlock()
	return nil
}

// fileClosed (gowarc hook, on its writer goroutine) queues crawl's closed
// file at path, with its index made while it was written (ix, when it is
// the file's and whole), for Run; it never blocks.
func (w *Writer) fileClosed(crawl, path string, ix *liveIndex) error {
	if ix != nil && (ix.dropped || ix.file != filepath.Base(path)) {
		w.dropIndex(ix)
		ix = nil
	}
	w.mu.Lock()
	delete(w.opened, crawl)
	w.closed = append(w.closed, closedFile{path: path, ix: ix})
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
	w.indexMu.Lock()
	defer w.indexMu.Unlock()
	w.mu.Lock()
	todo := w.closed
	w.closed = nil
	w.mu.Unlock()
	var errs error
	for i := range todo {
		if err := w.indexAndList(ctx, &todo[i]); err != nil {
			w.mu.Lock()
			w.closed = append(w.closed, todo[i:]...)
			w.mu.Unlock()
			return errors.Join(errs, err)
		}
	}
	return errs
}

// indexAndList lists the closed file at f.path in warc_files and then
// writes its CDXJ index beside it (a file without an index is re-listed
// by the next start: the listing is idempotent): the index made while it
// was written, or, without one (f.ix nil), the file read back.
func (w *Writer) indexAndList(ctx context.Context, f *closedFile) error {
	if _, err := os.Stat(f.path); errors.Is(err, os.ErrNotExist) {
		w.dropIndex(f.ix)
		return nil // a legacy file that held only a deleted crawl's records (DeleteCrawl)
	}
	var ix fileIndex
	var err error
	if f.ix != nil {
		ix = f.ix.ix
		slices.Sort(ix.lines) // again on a retry: sorted already
	} else {
		w.m.indexReread.Inc()
		ix, err = indexFile(f.path, f.recovered)
	}
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
	if f.ix == nil {
		f.ix = &liveIndex{ix: ix} // a retry (listing failed) does not read it again
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
	row.CrawlID, _ = warcdir.CrawlOf(w.opts.Prefix, row.File) // "" for a legacy file
	if w.files != nil {
		if err := w.files.Write(ctx, row); err != nil {
			return fmt.Errorf("list warc file %s: %w", row.File, err)
		}
	}
	if err := writeIndex(f.path+indexSuffix, ix.lines); err != nil {
		return err
	}
	w.dropIndex(f.ix)
	w.m.filesClosed.Inc()
	w.m.fileBytes.Add(float64(st.Size()))
	w.log.Info("closed warc file", zap.String("file", row.File), zap.Int("records", ix.records),
		zap.Int64("bytes", st.Size()), zap.Bool("recovered", f.recovered))
	return nil
}

// indexFetch adds the records of the fetch b, just written (resps), to
// the index of cf's file: the main record's CDXJ line (its gzip member
// ends where the metadata record's begins) and the counts. The caller
// holds gowarcMu.
func (w *Writer) indexFetch(cf *crawlFile, uri string, b *built, resps []gowarc.WriteResponse) {
	li := cf.ix
	if li == nil || li.file != resps[0].FileName {
		w.dropIndex(li) // not handed to fileClosed: its file did not close whole
		li = &liveIndex{file: resps[0].FileName}
		li.ix.records = 1 // the warcinfo record
		li.ix.opened = cf.openedAt.UTC().Truncate(time.Second)
		cf.ix = li
	}
	if li.dropped {
		return
	}
	li.ix.records += len(resps)
	switch b.kind {
	case "revisit":
		li.ix.revisits++
	default:
		li.ix.responses++
	}
	rec := b.recs[b.main]
	date, _ := rec.Date()
	off := resps[b.main].FileOffset
	line := cdxLine(li.file, uri, date, rec.WarcHeader().Get(gowarc.WarcPayloadDigest), b.status, b.mime,
		off, resps[b.main+1].FileOffset-off)
	n := int64(len(line) + 16) // and the string header
	if w.indexBytes.Add(n) > w.opts.MaxIndexBytes {
		w.indexBytes.Add(-n)
		w.dropIndex(li)
		return
	}
	li.bytes += n
	li.ix.lines = append(li.ix.lines, line)
}

// dropIndex gives up li's lines (nil: none): its file is read again to
// be indexed.
func (w *Writer) dropIndex(li *liveIndex) {
	if li == nil || li.dropped {
		return
	}
	li.dropped = true
	w.indexBytes.Add(-li.bytes)
	li.bytes, li.ix.lines = 0, nil
}

// warcinfo fills the warcinfo record of a file of crawl: the crawler, its
// version, the user agent and the crawl's specification when it was
// opened.
func (w *Writer) warcinfo(rb gowarc.WarcRecordBuilder, crawl string) error {
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
			if s.GetCrawlId() != crawl {
				continue
			}
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

// names generates the file names of a crawl,
// <prefix>-<crawl>-<timestamp>-<serial>-<instance>.warc (warcdir.Name;
// gowarc appends .gz, and .open while the file is written), the serial
// shared by the Writer's crawls.
type names struct {
	dir, prefix, crawl, instance string
	now                          func() time.Time
	serial                       *atomic.Int64
}

// NewWarcfileName implements gowarc.WarcFileNameGenerator. A name a file
// of the directory has already (the serial starts again at each start of
// the process, and a restart can fall in the same second) is skipped:
// gowarc would rename the new file over it when it closes.
func (n *names) NewWarcfileName() (string, string) {
	for {
		name := warcdir.Name(n.prefix, n.crawl, n.now(), n.serial.Add(1), n.instance)
		if !exists(filepath.Join(n.dir, name+".gz")) && !exists(filepath.Join(n.dir, name+".gz"+openSuffix)) {
			return n.dir, name
		}
	}
}

// exists reports whether something is at path.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, os.ErrNotExist)
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
