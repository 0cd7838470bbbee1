package warc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/nlnwa/gowarc/v3"
)

// recoverDir closes what a previous process left in the directory: every
// .open file is cut after its last complete record and renamed, or removed
// when no fetch of it is complete; closed files without an index (closed
// or recovered but not listed) are queued for Run to index and list. (A
// rewrite a crash interrupted, warcdir.RemoveCrawl's, is removed by the
// next one: the file it rewrote is whole.) The
// attempts of recovered files are remembered, so that a re-delivered
// fetch archived again is counted as a duplicate.
func (w *Writer) recoverDir() error {
	entries, err := os.ReadDir(w.opts.Dir)
	if err != nil {
		return fmt.Errorf("read warc directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(w.opts.Dir, name)
		switch {
		case strings.HasSuffix(name, warcSuffix+openSuffix):
			if err := w.recoverFile(path); err != nil {
				return err
			}
		case strings.HasSuffix(name, indexSuffix+openSuffix):
			_ = os.Remove(path) // half an index: written again below
		}
	}
	entries, err = os.ReadDir(w.opts.Dir)
	if err != nil {
		return fmt.Errorf("read warc directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, warcSuffix) {
			continue
		}
		path := filepath.Join(w.opts.Dir, name)
		if _, err := os.Stat(path + indexSuffix); errors.Is(err, os.ErrNotExist) {
			w.closed = append(w.closed, closedFile{path: path, recovered: true})
		}
	}
	return nil
}

// recoverFile closes the .open file at path.
func (w *Writer) recoverFile(path string) error {
	final := strings.TrimSuffix(path, openSuffix)
	c, err := cutAfterLastFetch(path)
	if err != nil {
		return fmt.Errorf("recover %s: %w", path, err)
	}
	if c.fetches == 0 {
		w.m.recovered.WithLabelValues("discarded").Inc()
		w.log.Warn("discarded warc file left open by a crash: no complete fetch", zap.String("file", filepath.Base(path)),
			zap.Int64("bytes", c.size), zap.NamedError("cut", c.bad))
		return nil
	}
	if err := os.Rename(path, final); err != nil {
		return fmt.Errorf("close recovered warc file: %w", err)
	}
	for _, a := range c.attempts {
		w.attempts.put(a, struct{}{})
	}
	w.m.recovered.WithLabelValues("closed").Inc()
	w.log.Warn("closed warc file left open by a crash", zap.String("file", filepath.Base(final)),
		zap.Int("fetches", c.fetches), zap.Int64("cut_bytes", c.size-c.keep), zap.NamedError("cut", c.bad))
	return nil
}

// cut is what cutAfterLastFetch found and did.
type cut struct {
	fetches    int      // complete fetches kept
	attempts   []string // their attempts
	size, keep int64    // bytes before and after
	bad        error    // why the scan stopped early, if it did
}

// cutAfterLastFetch reads the WARC file at path, verifying every record,
// and cuts it after the last complete fetch, or removes it when it holds
// none. A fetch's records are written in one call, response (or
// resource) then metadata, and a page's rendering ends in its metadata
// record (ArchiveRender): the cut is after a metadata record, so that a
// kept response always has its metadata; what follows (a member cut short
// by a crash or a failed write, a rendering's records without their
// metadata) belongs to fetches never acknowledged.
func cutAfterLastFetch(path string) (c cut, err error) {
	var attempts []string
	_, c.bad, err = scan(path, true, func(m member) error {
		switch m.record.Type() {
		case gowarc.Response, gowarc.Resource, gowarc.Revisit:
			if a := m.record.WarcHeader().Get(attemptField); a != "" {
				attempts = append(attempts, a)
			}
		case gowarc.Metadata:
			c.fetches++
			c.keep = m.offset + m.length
			c.attempts = append(c.attempts, attempts...)
			attempts = attempts[:0]
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return c, fmt.Errorf("stat warc file: %w", err)
	}
	c.size = st.Size()
	if c.fetches == 0 {
		if err := os.Remove(path); err != nil {
			return c, fmt.Errorf("remove warc file without a complete fetch: %w", err)
		}
		return c, nil
	}
	if c.keep < c.size {
		if err := os.Truncate(path, c.keep); err != nil {
			return c, fmt.Errorf("truncate warc file: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return c, fmt.Errorf("open warc file: %w", err)
	}
	serr := f.Sync()
	if cerr := f.Close(); serr == nil {
		serr = cerr
	}
	if serr != nil {
		return c, fmt.Errorf("sync cut warc file: %w", serr)
	}
	return c, nil
}
