package pages

import (
	"context"
	"encoding/json"
	"net/url"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/doctext"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
)

// ResultOK is the documents_read_total result of a document read whole.
const ResultOK = "ok"

// readDocument reads a document that is not HTML (a PDF, an office file)
// of a media type its crawl keeps (CrawlSpec.documents) into res: its text,
// title and properties become a document like a page's, its links are
// scoped and published like a page's. Whatever stops the reading (an
// encrypted, truncated or malformed file, a bomb, the time limit) is
// recorded in document_meta.parse_error with what was read before it: the
// page is never lost, and the parser never dies of a document. An
// X-Robots-Tag header applies as to a page (noindex: no document;
// nofollow: no links).
func (p *Processor) readDocument(ctx context.Context, page *crawlv1.FetchedPage, pageURL, mt string, rules *scope.Rules, res *result) {
	base, _ := url.Parse(pageURL) // canonical: parses
	start := time.Now()
	d, err := p.docs.Extract(ctx, mt, page.GetBody(), base, doctext.Limits{
		MaxTextBytes: p.cfg.MaxTextBytes, MaxTime: p.cfg.DocumentTimeout, MaxPages: p.cfg.DocumentMaxPages})
	p.metrics.documentDuration.Observe(time.Since(start).Seconds())
	if ctx.Err() != nil {
		// Stopped by the handler's end (a revoke, the shutdown), not by
		// the document: nothing is recorded, the batch is not acked
		// (Handle), and the page is read again.
		return
	}
	kind := doctext.ErrorKind(err)
	result := kind
	if result == "" {
		result = ResultOK
	}
	p.metrics.documentsRead.WithLabelValues(doctypes.Short(mt), result).Inc()
	if err != nil {
		p.log.Info("document read with an error", telemetry.Crawl(page.GetCrawlId()), telemetry.URL(pageURL), zap.String("parse_error", kind), zap.Error(err))
	}

	nofollow, noindex := false, false
	if tag, ok := page.GetHeaders()["x-robots-tag"]; ok {
		nofollow, noindex = extract.ParseRobotsDirectives(tag)
	}
	links := make([]extract.Link, 0, len(d.Links))
	for _, l := range d.Links {
		c, err := urlcanon.Canonicalize(l)
		switch {
		case err != nil:
			res.drop(extract.DropInvalid, 1)
		case c == pageURL:
			res.drop(extract.DropSelf, 1)
		case nofollow:
			res.drop(extract.DropNoFollow, 1)
		default:
			links = append(links, extract.Link{URL: c, Tag: "document"})
		}
	}
	p.links(page, pageURL, res, timestamppb.New(p.now()), links, rules, true, false)
	if noindex {
		res.outcome = OutcomeNoIndex
		return
	}
	res.outcome = OutcomeDocument
	res.doc = p.document(page, pageURL, res.host, extract.Result{Title: d.Title, Text: d.Text, TextTruncated: d.Truncated}, mt)
	if props := properties(d.Properties); props != "" {
		res.doc.row.Properties, res.doc.msg.Properties = props, props
	}
	res.doc.meta.ParseError, res.doc.msg.ParseError = kind, kind
}

// properties is a document's metadata as one JSON object, "" when it has
// none.
func properties(pr doctext.Properties) string {
	b, err := json.Marshal(pr)
	if err != nil || string(b) == "{}" {
		return ""
	}
	return string(b)
}
