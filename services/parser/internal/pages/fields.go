package pages

import (
	"bytes"
	"net/url"

	"go.uber.org/zap"
	"golang.org/x/net/html"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/crawlsettings"
	"github.com/trawl-crawler/trawl/libs/fieldrules"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// newFieldRules compiles each crawl's extraction rules once per revision.
// A specification whose rules do not compile (the seeder checks them; an
// older seeder or a hand-written record may not) takes no fields, and the
// error is logged once per revision.
func newFieldRules(log *zap.Logger) *crawlsettings.Compiled[*fieldrules.Set] {
	return crawlsettings.NewCompiled(func(spec *crawlv1.CrawlSpec) (*fieldrules.Set, error) {
		return fieldrules.Compile(spec.GetExtract())
	}, func(crawlID string, err error) {
		log.Warn("crawl's extraction rules invalid: no fields taken", telemetry.Crawl(crawlID), zap.Error(err))
	})
}

// applyFields takes the fields of the crawl's first extraction rule that
// matches the page into doc. Only a page a rule matches is parsed into a
// tree (the extractor streams): a crawl without rules pays nothing.
func (p *Processor) applyFields(doc *document, spec *crawlv1.CrawlSpec, body []byte) {
	if spec.GetExtract() == nil {
		return
	}
	rule := p.fields.Get(doc.row.CrawlID, spec).Match(doc.row.Host, doc.row.URL)
	if rule == nil {
		return
	}
	tree, err := html.Parse(bytes.NewReader(body))
	if err != nil { // only a reader's error: not with bytes
		return
	}
	page, _ := url.Parse(doc.row.URL) // canonical: parses
	res := rule.Apply(tree, fieldrules.BaseOf(tree, page))
	fields := string(res.Fields)
	doc.row.Fields, doc.msg.Fields = fields, fields
	doc.meta.ExtractRule, doc.msg.ExtractRule = rule.Name(), rule.Name()
	doc.meta.ExtractMissing, doc.msg.ExtractMissing = res.Missing, res.Missing
	p.metrics.extractPages.WithLabelValues(rule.Name()).Inc()
	if n := len(res.Found); n > 0 {
		p.metrics.extractFields.WithLabelValues(rule.Name(), "found").Add(float64(n))
	}
	if n := len(res.Missing); n > 0 {
		p.metrics.extractFields.WithLabelValues(rule.Name(), "missing").Add(float64(n))
	}
}
