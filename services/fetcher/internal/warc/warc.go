// Package warc archives what the fetcher fetched as WARC/1.1 files (ISO
// 28500): per fetch a request and a response record (revisit for a 304 or
// a payload already archived, resource for FTP) and a metadata record; a
// warcinfo record per file. A page rendered in a browser (the fetcher's
// --render) has, before its own, the records of what the browser fetched
// (ArchiveRender, render.go: request and response records of its
// subresources, its DOM, a metadata record), all with its WARC-Page-ID.
// The records are written by this package (encode.go: headers, SHA-1
// digests, one gzip member each, a fetch's members in one write) and read
// with github.com/nlnwa/gowarc (recovery, the indexes of files read back,
// the tests).
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
	// each costs a file descriptor and its index lines so far.
	DefaultMaxOpenFiles = 16
	// DefaultMaxIndexBytes bounds the index lines of open files kept
	// in memory.
	DefaultMaxIndexBytes = 64 << 20
)

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
	// HuffmanOnly compresses the records with Huffman coding only
	// (huffmanLevel), not DEFLATE level 1: about half the CPU per fetch
	// of an identity-coded page for about half as many bytes again on
	// disk (encode.go has the figures).
	HuffmanOnly bool
	// MaxBodyBytes is the fetcher's body cap. The writer no longer
	// needs it (record blocks are not copied, the body is written from
	// the fetch's buffer); kept so that callers and configurations stay
	// as they are.
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

// gzipLevel is the DEFLATE level of the records' members.
func (o Options) gzipLevel() int {
	if o.HuffmanOnly {
		return huffmanLevel
	}
	return gzipLevel
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

// gowarcMu serializes what makes gowarc record options (gowarc sets a
// package variable then, uuid.EnableRandPool: scan's readers) and the
// writes of every Writer (its encoder), and guards every Writer's open
// files (Writer.crawls) and deleted crawls.
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
	opts  Options
	log   *zap.Logger
	m     *metrics
	files FileLister
	lock  *os.File

	digests  *memory[revisitTarget]
	attempts *memory[struct{}]
	// pages is the WARC-Page-ID of each attempt whose rendering was
	// archived (ArchiveRender), for the page's own records (Archive,
	// right after).
	pages *memory[string]

	// Under gowarcMu: the open file of each crawl (at most
	// Options.MaxOpenFiles), uses to order them by their last use, the
	// crawls deleted (DeleteCrawl: never archived again; one entry per
	// deleted crawl, as the control topic keeps their specs) and the
	// encoder of the records.
	crawls  map[string]*crawlFile
	uses    uint64
	deleted map[string]bool
	enc     *encoder

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

// crawlFile is one crawl's file: opened at the crawl's first write,
// closed (and opened again at the next write) by rotation. Under gowarcMu.
type crawlFile struct {
	crawl    string
	names    *names
	used     uint64   // Writer.uses at its last Archive
	f        *os.File // nil: none open
	name     string   // the file's base name once closed
	path     string   // where it is written (….open)
	size     int64
	warcinfo string     // its warcinfo record's WARC-Record-ID
	ix       *liveIndex // its index so far
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
		pages:    newMemory[string](renderPages),
		opened:   make(map[string]time.Time),
		crawls:   make(map[string]*crawlFile),
		deleted:  make(map[string]bool),
		notify:   make(chan struct{}, 1),
		enc:      newEncoderLevel(o.gzipLevel()),
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

// fileFor returns crawl's file (not opened: write opens it), after
// closing the least recently used crawl's file when Options.MaxOpenFiles
// are open. The caller holds gowarcMu.
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
	cf := &crawlFile{crawl: crawl, used: w.uses, names: &names{dir: w.opts.Dir, prefix: w.opts.Prefix, crawl: crawl,
		instance: safeName(w.opts.Instance), now: w.opts.Now, serial: &w.serial}}
	w.crawls[crawl] = cf
	return cf
}

// closeCrawl closes crawl's file, if one is open, and forgets it. The
// caller holds gowarcMu.
func (w *Writer) closeCrawl(crawl string) {
	cf := w.crawls[crawl]
	if cf == nil {
		return
	}
	delete(w.crawls, crawl)
	w.closeFile(cf)
}

// openFile opens a new file for cf and puts its warcinfo record into the
// encoder's output, the start of the file's first write. The caller holds
// gowarcMu.
func (w *Writer) openFile(cf *crawlFile) error {
	dir, base := cf.names.NewWarcfileName()
	name := base + ".gz"
	path := filepath.Join(dir, name+openSuffix)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
	if err != nil {
		return fmt.Errorf("create warc file: %w", err)
	}
	w.fileOpened(cf.crawl)
	now := w.opts.Now()
	info := &record{typ: "warcinfo", date: warcDate(now), id: w.enc.newID(), contentType: warcFieldsType,
		fields: []field{{"WARC-Filename", name}}, parts: [][]byte{[]byte(w.warcinfo(cf.crawl))}}
	if _, err := w.enc.member(info, nil, ""); err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		w.fileGone(cf.crawl)
		return fmt.Errorf("encode warcinfo record: %w", err)
	}
	cf.f, cf.name, cf.path, cf.size, cf.warcinfo = f, name, path, 0, info.id
	cf.ix = &liveIndex{file: name, ix: fileIndex{records: 1, opened: now.UTC().Truncate(time.Second)}}
	return nil
}

// write appends the records of one fetch to cf's file (opening one if
// none is open) in one write, each record a gzip member, each naming the
// others (WARC-Concurrent-To) and the file's warcinfo record. It returns
// the offset of each record and the end of the last one. A write that
// fails closes the file: it may end in part of a record, which its index
// (read back) cuts after its last complete fetch. The caller holds
// gowarcMu.
func (w *Writer) write(cf *crawlFile, recs []*record) (offs []int64, err error) {
	w.enc.out.Reset()
	if cf.f == nil {
		if err := w.openFile(cf); err != nil {
			return nil, err
		}
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.id
	}
	offs = make([]int64, len(recs)+1)
	off := cf.size + int64(w.enc.out.Len())
	for i, r := range recs {
		offs[i] = off
		n, err := w.enc.member(r, ids, cf.warcinfo)
		if err != nil {
			if cf.size == 0 {
				w.closeFile(cf) // its warcinfo record was not written: removed
			}
			return nil, fmt.Errorf("encode %s record: %w", r.typ, err)
		}
		off += n
	}
	offs[len(recs)] = off
	_, err = cf.f.Write(w.enc.out.Bytes())
	if err == nil && w.opts.Fsync {
		err = cf.f.Sync()
	}
	if err != nil {
		cf.size = max(cf.size, 1) // not empty: closeFile keeps it, to be cut
		w.dropIndex(cf.ix)
		w.closeFile(cf)
		return nil, fmt.Errorf("write warc records to %s: %w", cf.name, err)
	}
	cf.size = off
	return offs, nil
}

// closeFile closes cf's file, if one is open, renames it to its name and
// queues it for Run (fileClosed); a file nothing was written to is
// removed. The caller holds gowarcMu.
func (w *Writer) closeFile(cf *crawlFile) {
	if cf.f == nil {
		return
	}
	f, path, size, ix := cf.f, cf.path, cf.size, cf.ix
	cf.f, cf.ix, cf.size = nil, nil, 0
	err := f.Close()
	if err == nil && size == 0 {
		_ = os.Remove(path)
		w.dropIndex(ix)
		w.fileGone(cf.crawl)
		return
	}
	final := strings.TrimSuffix(path, openSuffix)
	if err == nil {
		err = rename(path, final)
	}
	if err != nil {
		// Left .open: the next start recovers it.
		w.log.Warn("close warc file, recovered at the next start", zap.String("file", filepath.Base(path)), zap.Error(err))
		w.dropIndex(ix)
		w.fileGone(cf.crawl)
		return
	}
	w.fileClosed(cf.crawl, final, ix)
}

// rename renames the file at from to to, and syncs their directory (as
// gowarc did), so that a closed file stays closed after a machine crash.
func rename(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return fmt.Errorf("rename warc file: %w", err)
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return fmt.Errorf("sync warc directory: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync warc directory: %w", err)
	}
	return nil
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
	// Building and writing are serialized: one encoder, and the files are
	// written one fetch at a time.
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
	b := w.build(req, res)
	key := b.key
	if id, ok := w.pages.get(key); ok {
		b.onPage(id) // rendered: ArchiveRender wrote what the browser fetched
	}
	if _, dup := w.attempts.get(key); dup {
		w.m.duplicates.Inc() // a re-delivered attempt archived again: harmless
	}
	cf := w.fileFor(crawl)
	offs, err := w.write(cf, b.recs)
	if err != nil {
		gowarcMu.Unlock()
		w.m.errors.Inc()
		return "", 0, err
	}
	file, offset = cf.name, offs[b.main]
	w.indexFetch(cf, &b, offs)
	if cf.size >= w.opts.MaxFileSize {
		w.closeFile(cf) // full: the crawl's next fetch opens a new file
	}
	gowarcMu.Unlock()
	for _, r := range b.recs {
		w.m.records.WithLabelValues(r.typ).Inc()
	}
	w.attempts.put(key, struct{}{})
	if b.digest != "" {
		rec := b.recs[b.main]
		w.digests.put(b.digest, revisitTarget{id: rec.id, uri: req.GetUrl(), date: rec.date})
	}
	return file, offset, nil
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

// fileOpened notes when crawl's file was opened.
func (w *Writer) fileOpened(crawl string) {
	w.mu.Lock()
	w.opened[crawl] = w.opts.Now()
	w.mu.Unlock()
}

// fileGone forgets crawl's file, removed or left open.
func (w *Writer) fileGone(crawl string) {
	w.mu.Lock()
	delete(w.opened, crawl)
	w.mu.Unlock()
}

// fileClosed queues crawl's closed file at path, with its index made
// while it was written (ix, when it is the file's and whole), for Run; it
// never blocks.
func (w *Writer) fileClosed(crawl, path string, ix *liveIndex) {
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

// capture is a record of a write that the index points at (response,
// revisit or resource): its place in the write, and the status and media
// type of its CDXJ line.
type capture struct {
	i            int
	status, mime string
}

// indexFetch adds the records of the fetch b, just written to cf's file
// at offs (and the end of the last), to its index: the main record's
// CDXJ line and the counts. The caller holds gowarcMu.
func (w *Writer) indexFetch(cf *crawlFile, b *built, offs []int64) {
	w.index(cf, b.recs, offs, capture{i: b.main, status: b.status, mime: b.mime})
}

// index adds recs, just written to cf's file at offs (and the end of the
// last), to its index: the CDXJ line of each of caps and the counts, as
// indexFile counts them when it reads the file back. The caller holds
// gowarcMu.
func (w *Writer) index(cf *crawlFile, recs []*record, offs []int64, caps ...capture) {
	li := cf.ix
	if li == nil || li.dropped {
		return
	}
	li.ix.records += len(recs)
	for _, c := range caps {
		rec := recs[c.i]
		switch rec.typ {
		case "revisit":
			li.ix.revisits++
		default:
			li.ix.responses++
		}
		date, _ := time.Parse(time.RFC3339Nano, rec.date)
		line := cdxLine(li.file, rec.uri, date, rec.payloadDigest, c.status, c.mime, offs[c.i], offs[c.i+1]-offs[c.i])
		n := int64(len(line) + 16) // and the string header
		if w.indexBytes.Add(n) > w.opts.MaxIndexBytes {
			w.indexBytes.Add(-n)
			w.dropIndex(li)
			return
		}
		li.bytes += n
		li.ix.lines = append(li.ix.lines, line)
	}
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

// warcinfo is the block of the warcinfo record of a file of crawl: the crawler, its
// version, the user agent and the crawl's specification when it was
// opened.
func (w *Writer) warcinfo(crawl string) string {
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
	return b.String()
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

// NewWarcfileName returns the directory and name of a new file. A name a file
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
