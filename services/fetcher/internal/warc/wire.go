package warc

import (
	"fmt"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/service"
)

// Setup opens the archive the fetcher's flags ask for and hands its
// writer (Drain: it closes its files once the consumer group stopped)
// and the warc_files writer (Flush) to svc. It returns nil when the
// archive is off (no --warc-dir).
func Setup(c Config, svc *service.Service, store *chstore.Store, batch chstore.BatchOptions,
	instance, userAgent string, maxBodyBytes int64, specs func() []*crawlv1.CrawlSpec,
) (*Writer, error) {
	if c.Dir == "" {
		return nil, nil
	}
	files := chstore.NewBatchWriter(store, chstore.WarcFiles, batch, svc.Log(), svc.Metrics())
	w, err := Open(c.Options(instance, userAgent, maxBodyBytes, specs), files, svc.Log(), svc.Metrics())
	if err != nil {
		return nil, fmt.Errorf("open warc archive: %w", err)
	}
	svc.Go(service.Drain, "warc writer", w.Run)
	svc.Go(service.Flush, "warc_files writer", files.Run)
	return w, nil
}
