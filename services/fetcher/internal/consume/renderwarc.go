package consume

import (
	"context"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/browser"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/partition"
)

// RenderArchiver archives what a browser fetched while it rendered a page
// (*warc.Writer): an Options.Archive that implements it archives the
// rendering of every page rendered, before the page's own fetch.
// ArchiveRender blocks until the records are written; safe for concurrent
// use.
type RenderArchiver interface {
	ArchiveRender(ctx context.Context, req *crawlv1.FetchRequest, res *httpfetch.Response, page *browser.Page) error
}

// archiveRender writes the rendering of t's page, fetched as res, to the
// archive when it keeps renderings (RenderArchiver): the requests and
// responses the browser saw, as Browsertrix archives a browser session,
// the DOM and how the load went. The page's own records follow (archive),
// as fetched. A load cut short by ctx is not archived: its page goes back
// to its queue, to be fetched and rendered again. A failure is logged and
// the page archived without its rendering: its fetch, the record of what
// was crawled, is archived (or left unacked) on its own.
func (s *Service) archiveRender(ctx context.Context, t *partition.Task, res *httpfetch.Response, page *browser.Page) {
	ra, ok := s.opts.Archive.(RenderArchiver)
	if !ok || ctx.Err() != nil {
		return
	}
	if err := ra.ArchiveRender(ctx, t.Req, res, page); err != nil {
		s.log.Warn("archived a page without its rendering's records", telemetry.URL(t.Req.GetUrl()), zap.Error(err))
	}
}
