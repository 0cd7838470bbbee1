package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chexport/exportfile"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// Exporter streams a crawl's documents and tables (ClickHouse).
type Exporter interface {
	// Documents calls fn per document in URL order until fn fails.
	Documents(ctx context.Context, crawlID string, fn func(jobs.Document) error) error
	// Export writes a crawl's rows of a table to w in a format, nothing
	// before the first row (a crawl without rows is exportfile.ErrNotFound),
	// and returns the rows written.
	Export(ctx context.Context, req exportfile.Request, w io.Writer) (int64, error)
}

// documents streams a crawl's documents as JSON lines, flushed every 100:
// 404 for an unknown crawl, 410 for a deleted one.
func (s *Server) documents(w http.ResponseWriter, r *http.Request) {
	spec := s.lookup(w, r)
	if spec == nil {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	n := 0
	err := s.exporter.Documents(r.Context(), spec.GetCrawlId(), func(d jobs.Document) error {
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		if n++; n%100 == 0 && flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	if err != nil {
		s.log.Warn("document export aborted", telemetry.Crawl(spec.GetCrawlId()), zap.Int("documents", n), zap.Error(err))
		if n == 0 { // nothing written yet: a proper error response
			writeError(w, http.StatusInternalServerError, "export documents: "+err.Error(), nil)
		}
		// Otherwise the headers are sent and the client sees a truncated
		// stream.
	}
}

// export streams one table of a crawl as a file (libs/chexport): 400 for
// an unknown table or format, 404 for an unknown crawl or one without rows
// in the table. Once the first row is written the status is sent; a later
// failure aborts the response, so that the client sees a broken transfer
// rather than a short file that looks complete.
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	table, terr := exportfile.ParseTable(q.Get("table"))
	format, ferr := exportfile.ParseFormat(q.Get("format"))
	if terr != nil || ferr != nil {
		var fields jobs.FieldErrors
		if terr != nil {
			fields = append(fields, jobs.FieldError{Field: "table", Message: terr.Error()})
		}
		if ferr != nil {
			fields = append(fields, jobs.FieldError{Field: "format", Message: ferr.Error()})
		}
		writeError(w, http.StatusBadRequest, errors.Join(terr, ferr).Error(), fields)
		return
	}
	spec := s.lookup(w, r)
	if spec == nil {
		return
	}
	id := spec.GetCrawlId()
	h := w.Header()
	h.Set("Content-Type", format.ContentType())
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": exportfile.FileName(id, table, format)}))
	cw := &countWriter{w: w}
	n, err := s.exporter.Export(r.Context(), exportfile.Request{CrawlID: id, Table: table, Format: format}, cw)
	if err == nil {
		return
	}
	if cw.n == 0 { // nothing written: a proper error response
		h.Del("Content-Disposition")
		if errors.Is(err, exportfile.ErrNotFound) {
			writeError(w, http.StatusNotFound, err.Error(), nil)
			return
		}
		s.log.Warn("export failed", telemetry.Crawl(id), zap.String("table", string(table)), zap.Error(err))
		writeError(w, http.StatusInternalServerError, "export "+string(table)+": "+err.Error(), nil)
		return
	}
	s.log.Warn("export aborted", telemetry.Crawl(id), zap.String("table", string(table)), zap.Int64("rows", n), zap.Error(err))
	panic(http.ErrAbortHandler)
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
