package pages

import (
	"context"
	"mime"
	"net/url"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/simhash"
	"github.com/trawl-crawler/trawl/libs/sitemap"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
	"github.com/trawl-crawler/trawl/services/parser/internal/langdetect"
	"github.com/trawl-crawler/trawl/services/parser/internal/traps"
)

// result is what one fetched page yields.
type result struct {
	outcome string
	links   []kafka.Message
	linkFPs []uint64 // fingerprint of each of links
	// suspects is how many of the last links are suspected traps: they
	// are published marked, never remembered as published, so that the
	// URL linked from a page that is no trap still reaches the scheduler.
	suspects int
	// inLinks are the records of links published before, published
	// again with in_links (their count of pages linking them doubled):
	// never remembered again nor dropped as repeats of the batch.
	inLinks []kafka.Message
	// countInLinks: the page's links count in-links (--in-links and
	// InLinksMatter for its crawl).
	countInLinks bool
	linkDepth    uint32 // depth of the links
	outlinks     int    // links the page has in the crawl's scope, published or not
	doc          *document
	carried      *chstore.CarriedRow // a 304 carrying an earlier crawl's document over
	linkRows     []chstore.LinkRow   // the page's in-scope links, for the links table
	crawlID      string
	host         string // politeness key of the page
	dropped      map[string]int
	followDup    bool
	nearDist     int // the crawl's near-duplicate distance (0: off)
}

// document is a page to store, before duplicate detection.
type document struct {
	row   chstore.DocumentRow
	meta  chstore.DocumentMetaRow
	msg   *crawlv1.Document
	bands []simhash.Band            // its simhash's bands, when it goes into the near-duplicate index
	near  *chstore.NearDuplicateRow // set when it nearly duplicates an earlier document
}

func (r *result) drop(reason string, n int) {
	if n <= 0 {
		return
	}
	if r.dropped == nil {
		r.dropped = make(map[string]int)
	}
	r.dropped[reason] += n
}

// process classifies one page and extracts it into outlink records and a
// document (nil under noindex and for list, result and sitemap pages). A
// page of a cancelled crawl (by its operator, its time limit or its
// deletion: crawlcontrol.StateAt) yields its document, since it was
// fetched, but no outlink: the crawl discovers nothing more, and its links
// are counted as dropped (DropCancelled).
func (p *Processor) process(ctx context.Context, page *crawlv1.FetchedPage) *result {
	if p.cfg.InLinks && !page.GetWillRetry() {
		// The page is fetched (or failed for good): its in-links order
		// nothing any more, so the links to it are not published again
		// for them (most are a site's own links, parsed here).
		fp := page.GetUrlFp()
		if fp == 0 {
			fp = fingerprint.URL(page.GetCrawlId(), page.GetUrl())
		}
		p.recent.Fetched(fp)
	}
	res := p.extract(ctx, page)
	if len(res.links)+len(res.inLinks) > 0 && p.cancelled(page.GetCrawlId()) {
		res.drop(DropCancelled, len(res.links)+len(res.inLinks))
		res.links, res.linkFPs, res.suspects, res.inLinks = nil, nil, 0, nil
	}
	return res
}

// cancelled reports whether a crawl is cancelled now.
func (p *Processor) cancelled(crawlID string) bool {
	if p.specs == nil {
		return false
	}
	return crawlcontrol.StateAt(p.specs.Get(crawlID), p.now()) == crawlv1.CrawlState_CRAWL_STATE_CANCELLED
}

// extract is process before the crawl's state is applied.
func (p *Processor) extract(ctx context.Context, page *crawlv1.FetchedPage) *result {
	res := &result{crawlID: page.GetCrawlId()}
	mt := mediaType(page.GetContentType())
	switch {
	case page.GetErrorKind() != "":
		res.outcome = OutcomeFetchError
		return res
	case page.GetStatusCode() == 304 && page.GetDocumentCrawlId() != "":
		p.carry(page, res)
		return res
	case page.GetStatusCode() < 200 || page.GetStatusCode() > 299:
		res.outcome = OutcomeHTTPStatus
		return res
	}
	pageURL, err := urlcanon.Canonicalize(page.GetUrl())
	if err != nil {
		res.outcome = OutcomeInvalidURL
		return res
	}
	res.host, _ = urlcanon.CanonicalKey(pageURL) // pageURL is canonical: cannot fail
	var spec *crawlv1.CrawlSpec
	if p.specs != nil {
		spec = p.specs.Scoped(page.GetCrawlId()) // the sites seeds redirected to are the crawl's
	}
	rules := p.rules.Rules(page.GetCrawlId(), spec)
	res.countInLinks = p.cfg.InLinks && InLinksMatter(spec)
	res.followDup = rules.FollowDuplicates()
	res.nearDist = rules.NearDistance()

	if !isHTMLType(mt) {
		if u, err := url.Parse(pageURL); err == nil && sitemap.Is(mt, u.Path) {
			p.sitemap(page, pageURL, rules, res)
			return res
		}
		if kept := doctypes.KeptType(spec.GetDocuments().GetContentTypes(), mt, ""); kept != "" && len(page.GetBody()) > 0 {
			p.readDocument(ctx, page, pageURL, kept, rules, res)
			return res
		}
		res.outcome = OutcomeNotHTML
		return res
	}

	engine, results, isSERP := p.engines.Match(page.GetSerpEngine(), pageURL)
	opts := extract.Options{
		MaxOutlinks:  p.cfg.MaxOutlinks,
		MaxTextBytes: p.cfg.MaxTextBytes,
		Results:      results,
		Detail:       rules.DetailSelector(),
		Resolved:     p.resolve,
	}
	// The X-Robots-Tag header carries the same directives as the meta tag.
	tag, hasTag := page.GetHeaders()["x-robots-tag"]
	headerNoIndex := false
	if hasTag {
		opts.NoFollow, headerNoIndex = extract.ParseRobotsDirectives(tag)
	}
	start := time.Now()
	ext, err := extract.Extract(pageURL, page.GetBody(), opts)
	p.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		res.outcome = OutcomeInvalidURL
		return res
	}
	for reason, n := range ext.Dropped {
		res.drop(reason, n)
	}
	ext.NoIndex = ext.NoIndex || headerNoIndex

	now := timestamppb.New(p.now())
	family, productive := p.links(page, pageURL, res, now, ext.Links, rules, !isSERP, true)
	trap := p.judgeFamily(page.GetCrawlId(), pageURL, rules, ext, len(family) > 0, productive)
	for _, f := range family {
		p.publish(page, pageURL, res, now, f.link, f.host, f.fp, trap)
	}
	switch {
	case isSERP:
		p.metrics.serp.WithLabelValues(engine).Inc()
		res.outcome = OutcomeSERP
		return res
	case ext.NoIndex:
		res.outcome = OutcomeNoIndex
		return res
	}
	detail := true
	if rules.HasDetailRules() {
		detail = ext.Detail || rules.DetailURL(pageURL)
	}
	if !detail {
		res.outcome = OutcomeList
		return res
	}
	res.outcome = OutcomeDocument
	res.doc = p.document(page, pageURL, res.host, ext, mt)
	p.applyFields(res.doc, spec, page.GetBody())
	return res
}

// links scopes a page's links (canonical, in document order) and
// publishes those kept into res (notSERP: false on a search engine's
// result page, whose links only its results are). With
// families, the new links one step on from the page in its URL family
// (the next month, the next page) are returned instead, to wait until the
// page is judged (traps): a page that repeats its family and brings
// nothing else new makes them suspects; productive says whether another
// new link was published.
func (p *Processor) links(page *crawlv1.FetchedPage, pageURL string, res *result, now *timestamppb.Timestamp,
	links []extract.Link, rules *scope.Rules, notSERP, families bool) (family []familyLink, productive bool) {
	maxLinks := rules.MaxOutlinks()
	res.links = make([]kafka.Message, 0, min(len(links), maxLinks))
	res.linkDepth = page.GetDepth() + 1
	srcFP := page.GetUrlFp()
	if srcFP == 0 {
		srcFP = fingerprint.URL(page.GetCrawlId(), pageURL)
	}
	for i, l := range links {
		host, err := urlcanon.CanonicalKey(l.URL)
		if err != nil {
			res.drop(DropKey, 1)
			continue
		}
		if reason := rules.Check(res.host, l.URL, host, notSERP); reason != "" {
			res.drop(reason, 1)
			continue
		}
		if res.outlinks >= maxLinks {
			res.drop(scope.DropOverCap, 1)
			continue
		}
		res.outlinks++
		fp := fingerprint.URL(page.GetCrawlId(), l.URL)
		if p.cfg.StoreLinks && p.sinks.Links != nil {
			res.linkRows = append(res.linkRows, chstore.LinkRow{CrawlID: page.GetCrawlId(), TargetHost: host, TargetURL: l.URL, TargetFP: fp,
				SourceHost: res.host, SourceURL: pageURL, SourceFP: srcFP, Position: uint16(min(i+1, 65535)),
				AnchorText: l.Anchor, Rel: l.Rel, Tag: l.Tag, Depth: uint16(min(res.linkDepth, 65535)), FoundAt: page.GetFetchedAt().AsTime()})
		}
		// A link published before is no new link (to the trap detector
		// too); when this page steps its in-link count, it goes again.
		if published, in := p.sighted(fp, srcFP, res.linkDepth, res.countInLinks); published {
			if in == 0 {
				res.drop(DropPublished, 1)
				continue
			}
			msg, err := p.message(page, pageURL, res, now, l, host, "", in)
			if err != nil {
				res.drop(DropKey, 1)
				continue
			}
			res.inLinks = append(res.inLinks, msg)
			continue
		}
		if families && traps.Step(pageURL, l.URL) {
			family = append(family, familyLink{l, host, fp})
			continue
		}
		productive = true
		p.publish(page, pageURL, res, now, l, host, fp, "")
	}
	return family, productive
}

// familyLink is a new link one step on from its page (traps.Step).
type familyLink struct {
	link extract.Link
	host string
	fp   uint64
}

// publish adds link l (on host, fingerprint fp) of page to res.links;
// trapFamily, when set, marks it a suspected trap (and it must come after
// every link that is not).
func (p *Processor) publish(page *crawlv1.FetchedPage, pageURL string, res *result, now *timestamppb.Timestamp,
	l extract.Link, host string, fp uint64, trapFamily string) {
	msg, err := p.message(page, pageURL, res, now, l, host, trapFamily, 0)
	if err != nil {
		res.drop(DropKey, 1)
		return
	}
	if trapFamily != "" {
		p.metrics.trapLinks.Inc()
		res.suspects++
	}
	res.links = append(res.links, msg)
	res.linkFPs = append(res.linkFPs, fp)
}

// message is the DiscoveredURL record of link l (on host) of page.
func (p *Processor) message(page *crawlv1.FetchedPage, pageURL string, res *result, now *timestamppb.Timestamp,
	l extract.Link, host, trapFamily string, inLinks uint32) (kafka.Message, error) {
	return kafkaio.NewMessage(p.topics.Discovered, []byte(host), &crawlv1.DiscoveredURL{
		CrawlId:      page.GetCrawlId(),
		Url:          l.URL,
		Depth:        res.linkDepth,
		ParentUrl:    pageURL,
		DiscoveredAt: now,
		Source:       crawlv1.Source_SOURCE_LINK,
		AnchorText:   l.Anchor,
		Rel:          l.Rel,
		TrapFamily:   trapFamily,
		InLinks:      inLinks,
	})
}

// InLinksMatter reports whether the in-links of a crawl's URLs are
// counted (with --in-links): when the crawl will stop before it has
// fetched every URL it admits (its specification sets a page budget or a
// time limit), so that which comes first decides what it holds, and it
// is not breadth-first. A crawl that fetches everything it admits would
// only pay the republished records (on the bench web, a tenth of the
// crawl's CPU) to reorder it. Without a specification (a crawl on the
// fleet's flags, whose --max-pages the parser does not know) they are
// counted.
func InLinksMatter(spec *crawlv1.CrawlSpec) bool {
	if spec == nil {
		return true
	}
	if spec.GetPriority().GetBreadthFirst() {
		return false
	}
	l := spec.GetLimits()
	return l.GetMaxPages() > 0 || l.GetMaxDuration().AsDuration() > 0
}

// sighted reports whether link fp, at depth, was published by this parser
// (the recent-links table) and, with --in-links, counts page from as one
// more page linking it: in, when not 0, is the link's new in-link count,
// to publish it again with.
func (p *Processor) sighted(fp, from uint64, depth uint32, count bool) (published bool, in uint32) {
	if !count {
		return p.recent.Published(fp, depth), 0
	}
	return p.recent.Sighted(fp, from, depth)
}

// judgeFamily tells the trap detector about a page at pageURL whose new
// links were published (productive: one is no step on from it; inFamily:
// one is) and returns the family's name when its new links one step on
// are suspected as a trap, or "". Only a page whose every new link is a
// step on is a candidate, and only its text is hashed.
func (p *Processor) judgeFamily(crawlID, pageURL string, rules *scope.Rules, ext extract.Result, inFamily, productive bool) string {
	switch {
	case productive:
		p.traps.Productive(crawlID, pageURL)
		return ""
	case !inFamily || rules.FollowTraps():
		return ""
	}
	if _, suspect := p.traps.Candidate(crawlID, pageURL, traps.Shape(ext.Title, ext.Text), p.cfg.TrapAllowance); suspect {
		return traps.Family(pageURL)
	}
	return ""
}

// carry records a 304 to the conditional request of a page an earlier
// crawl fetched (FetchedPage.document_crawl_id): unchanged since, so that
// crawl's document is the page's (documents_carried), joined by the
// documents export instead of copied. It has no body, hence no links: the
// earlier crawl's URLs were seeded already (CrawlSpec.previous_crawl_id).
func (p *Processor) carry(page *crawlv1.FetchedPage, res *result) {
	pageURL, err := urlcanon.Canonicalize(page.GetUrl())
	if err != nil {
		res.outcome = OutcomeInvalidURL
		return
	}
	res.host, _ = urlcanon.CanonicalKey(pageURL) // pageURL is canonical: cannot fail
	urlFP := page.GetUrlFp()
	if urlFP == 0 {
		urlFP = fingerprint.URL(page.GetCrawlId(), pageURL)
	}
	from := page.GetDocumentCrawlId()
	res.outcome = OutcomeCarried
	res.carried = &chstore.CarriedRow{
		CrawlID:   page.GetCrawlId(),
		URL:       pageURL,
		URLFP:     urlFP,
		Host:      res.host,
		FromCrawl: from,
		FromURLFP: fingerprint.URL(from, pageURL),
		CheckedAt: page.GetFetchedAt().AsTime(),
	}
}

func (p *Processor) document(page *crawlv1.FetchedPage, pageURL, host string, ext extract.Result, mt string) *document {
	urlFP := page.GetUrlFp()
	if urlFP == 0 {
		urlFP = fingerprint.URL(page.GetCrawlId(), pageURL)
	}
	lang := ext.Language
	if lang == "" {
		lang = headerLanguage(page.GetHeaders()["content-language"])
	}
	contentFP := fingerprint.String(ext.Text)
	sim := simhash.Sum64(ext.Text)
	fetchedAt := page.GetFetchedAt().AsTime()
	jsonLD, og, md := ext.JSONLDText(), ext.OpenGraphText(), ext.MicrodataText()
	structErrs := uint16(min(ext.StructuredErrors, 65535))
	detected := ""
	if p.cfg.DetectLanguage {
		detected = langdetect.Detect(ext.Text)
	}
	return &document{
		row: chstore.DocumentRow{
			CrawlID:     page.GetCrawlId(),
			URL:         pageURL,
			URLFP:       urlFP,
			Host:        host,
			FetchedAt:   fetchedAt,
			Status:      uint16(page.GetStatusCode()),
			Title:       ext.Title,
			Text:        ext.Text,
			ContentFP:   contentFP,
			ContentType: mt,
			Language:    lang,
			JSONLD:      jsonLD,
			OpenGraph:   og,

			LanguageDetected: detected,
			Microdata:        md,
			Rendered:         page.GetRenderOutcome(),
		},
		meta: chstore.DocumentMetaRow{
			CrawlID:          page.GetCrawlId(),
			URL:              pageURL,
			URLFP:            urlFP,
			Host:             host,
			FetchedAt:        fetchedAt,
			Description:      ext.Description,
			CanonicalURL:     ext.Canonical,
			Simhash:          sim,
			ContentFP:        contentFP,
			IsDetail:         true,
			TextTruncated:    ext.TextTruncated,
			Depth:            uint16(min(page.GetDepth(), 65535)),
			StructuredErrors: structErrs,
		},
		msg: &crawlv1.Document{
			CrawlId:          page.GetCrawlId(),
			Url:              pageURL,
			UrlFp:            urlFP,
			Host:             host,
			FetchedAt:        page.GetFetchedAt(),
			StatusCode:       page.GetStatusCode(),
			ContentType:      mt,
			Title:            ext.Title,
			Description:      ext.Description,
			Language:         lang,
			Text:             ext.Text,
			ContentFp:        contentFP,
			Simhash:          sim,
			Depth:            page.GetDepth(),
			CanonicalUrl:     ext.Canonical,
			TextTruncated:    ext.TextTruncated,
			JsonLd:           jsonLD,
			Opengraph:        og,
			StructuredErrors: uint32(structErrs),
			LanguageDetected: detected,
			Microdata:        md,
		},
	}
}

// IsHTML reports whether a Content-Type (with or without parameters) is
// an HTML media type the parser extracts.
func IsHTML(contentType string) bool { return isHTMLType(mediaType(contentType)) }

func isHTMLType(mt string) bool { return mt == "text/html" || mt == "application/xhtml+xml" }

func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(contentType, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// headerLanguage is the first language of a Content-Language header.
func headerLanguage(v string) string {
	first, _, _ := strings.Cut(v, ",")
	first = strings.ToLower(strings.TrimSpace(first))
	if len(first) > 35 {
		return ""
	}
	return first
}
