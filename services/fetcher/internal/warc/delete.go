package warc

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/warcdir"
)

// DeleteCrawl is DeleteCrawls of one crawl.
func (w *Writer) DeleteCrawl(ctx context.Context, crawl string) (warcdir.Removal, error) {
	return w.DeleteCrawls(ctx, crawl)
}

// DeleteCrawls removes deleted crawls' records from the directory, in one
// pass over it however many crawls: it stops archiving each crawl (a fetch of it still in flight is not
// archived), closes its open file, forgets its closed files not listed
// yet, and removes its files and their indexes (warcdir.RemoveCrawl):
// files of the layout before a file held one crawl are rewritten without
// its records and listed again in warc_files. The rows of warc_files
// that listed its files go with the crawl's rows (warc_files.crawl_id,
// deleted by the seeder's mutations). Idempotent: the fetcher calls it
// with the deleted crawls at start and whenever one is deleted; a call
// that finds nothing removes nothing. Safe for concurrent use.
func (w *Writer) DeleteCrawls(ctx context.Context, crawls ...string) (warcdir.Removal, error) {
	if len(crawls) == 0 {
		return warcdir.Removal{}, nil
	}
	gone := make(map[string]bool, len(crawls))
	for _, c := range crawls {
		if c == "" {
			return warcdir.Removal{}, errors.New("delete warc files: empty crawl id")
		}
		gone[c] = true
	}
	crawl := strings.Join(crawls, ",") // for the logs
	w.indexMu.Lock()
	defer w.indexMu.Unlock()
	gowarcMu.Lock()
	for c := range gone {
		w.deleted[c] = true
		w.closeCrawl(c)
	}
	gowarcMu.Unlock()
	w.mu.Lock()
	w.closed = slices.DeleteFunc(w.closed, func(f closedFile) bool {
		id, ok := warcdir.CrawlOf(w.opts.Prefix, filepath.Base(f.path))
		if ok && gone[id] {
			w.dropIndex(f.ix)
			return true
		}
		return false
	})
	w.mu.Unlock()
	r, err := warcdir.RemoveCrawls(w.opts.Dir, w.opts.Prefix, crawls...)
	w.m.deletedFiles.Add(float64(r.Files))
	w.m.deletedBytes.Add(float64(r.RemovedBytes()))
	w.m.rewrittenFiles.Add(float64(len(r.Rewritten)))
	if r.Files > 0 || len(r.Rewritten) > 0 {
		w.log.Info("removed warc files of deleted crawls", telemetry.Crawl(crawl), zap.Int("files", r.Files),
			zap.Int64("bytes", r.RemovedBytes()), zap.Int("rewritten", len(r.Rewritten)))
	}
	if err != nil {
		return r, fmt.Errorf("remove warc files of crawls %s: %w", crawl, err)
	}
	for _, rw := range r.Rewritten {
		w.log.Info("rewrote a warc file without deleted crawls' records", telemetry.Crawl(crawl),
			zap.String("file", rw.File), zap.Int("records_removed", rw.RemovedRecords), zap.Int64("bytes_removed", rw.RemovedBytes))
		if w.files == nil {
			continue
		}
		row := rows.WarcFileRow{File: rw.File, Dir: w.opts.Dir, Fetcher: w.opts.Instance, OpenedAt: rw.Opened,
			ClosedAt: w.opts.Now().Truncate(time.Second), Bytes: uint64(rw.Bytes), Records: uint32(rw.Records),
			Responses: uint32(rw.Responses), Revisits: uint32(rw.Revisits)}
		if err := w.files.Write(ctx, row); err != nil {
			return r, fmt.Errorf("list rewritten warc file %s: %w", rw.File, err)
		}
	}
	return r, nil
}
