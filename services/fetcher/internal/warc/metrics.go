package warc

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the archive (crawler_fetcher_warc_*).
type metrics struct {
	records     *prometheus.CounterVec
	duplicates  prometheus.Counter
	errors      prometheus.Counter
	filesClosed prometheus.Counter
	fileBytes   prometheus.Counter
	recovered   *prometheus.CounterVec

	evicted        prometheus.Counter
	skippedDeleted prometheus.Counter
	deletedFiles   prometheus.Counter
	deletedBytes   prometheus.Counter
	rewrittenFiles prometheus.Counter
	indexReread    prometheus.Counter
	renderErrors   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_records_total", Help: "WARC records written, by type.",
		}, []string{"type"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_duplicate_records_total",
			Help: "Fetches archived again for an attempt already archived (a re-delivery after a crash or rebalance).",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_write_errors_total", Help: "Fetches whose records could not be written (left unacked).",
		}),
		filesClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_files_closed_total", Help: "WARC files closed, indexed and listed in warc_files.",
		}),
		fileBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_file_bytes_total", Help: "Bytes of the WARC files closed.",
		}),
		recovered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_recovered_files_total",
			Help: "Files left open by a crash, at start: closed (cut after the last complete fetch) or discarded; closed files cut after a failed write (cut).",
		}, []string{"outcome"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_files_evicted_total",
			Help: "Files closed because another crawl needed a file and --warc-max-open-files were open (the least recently used).",
		}),
		skippedDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_deleted_crawl_fetches_total",
			Help: "Fetches not archived because their crawl was deleted while they were in flight.",
		}),
		deletedFiles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_deleted_files_total",
			Help: "WARC files removed because their crawl was deleted.",
		}),
		deletedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_deleted_bytes_total",
			Help: "Bytes removed from the WARC directory because their crawl was deleted (files, indexes, and records cut out of files of several crawls).",
		}),
		rewrittenFiles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_rewritten_files_total",
			Help: "WARC files of several crawls (written before a file held one crawl) rewritten without a deleted crawl's records.",
		}),
		indexReread: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_index_rereads_total",
			Help: "Closed files read again to be indexed: recovered after a crash, cut after a failed write, or past the memory bound of the index lines kept while written (64 MiB).",
		}),
		renderErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "crawler_fetcher_warc_render_write_errors_total",
			Help: "Renderings whose records (what the browser fetched, the DOM) could not be written; their page is archived as fetched.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.records, m.duplicates, m.errors, m.filesClosed, m.fileBytes, m.recovered,
		m.evicted, m.skippedDeleted, m.deletedFiles, m.deletedBytes, m.rewrittenFiles, m.indexReread, m.renderErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register warc metrics: %w", err)
		}
	}
	return m, nil
}
