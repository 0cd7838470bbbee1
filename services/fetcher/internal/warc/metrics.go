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
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.records, m.duplicates, m.errors, m.filesClosed, m.fileBytes, m.recovered} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register warc metrics: %w", err)
		}
	}
	return m, nil
}
