package pages

import (
	"bytes"
	"errors"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/fingerprint"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/libs/sitemap"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
)

// sitemap publishes the URLs a sitemap lists as SOURCE_SITEMAP discovered
// URLs (the entries of a sitemap index are sitemaps, parsed when fetched).
// What a damaged or over-large sitemap listed before the damage or the
// cap is published.
func (p *Processor) sitemap(page *crawlv1.FetchedPage, pageURL string, rules *scope.Rules, res *result) {
	parsed, err := sitemap.Parse(bytes.NewReader(page.GetBody()), sitemap.MaxEntries, sitemap.MaxBytes)
	if err != nil {
		if errors.Is(err, sitemap.ErrNotSitemap) {
			res.outcome = OutcomeNotHTML
			return
		}
		res.outcome = OutcomeBadSitemap
		return
	}
	for _, e := range parsed.Entries {
		if errors.Is(e.Err, sitemap.ErrNotURL) { // a text sitemap lists URLs only: this is other text
			res.outcome = OutcomeNotHTML
			return
		}
	}
	if parsed.Truncated {
		res.drop(scope.DropOverCap, 1)
	}
	resolver, err := urlcanon.NewResolver(pageURL)
	if err != nil {
		res.outcome = OutcomeInvalidURL
		return
	}
	now := timestamppb.New(p.now())
	res.outcome = OutcomeSitemap
	res.linkDepth = page.GetDepth() + 1
	seen := make(map[string]bool, len(parsed.Entries))
	for _, e := range parsed.Entries {
		switch {
		case errors.Is(e.Err, sitemap.ErrNoLoc): // lists nothing
			continue
		case errors.Is(e.Err, sitemap.ErrTooLong):
			res.drop(extract.DropTooLong, 1)
			continue
		}
		u, err := resolver.Resolve(e.Loc)
		switch {
		case errors.Is(err, urlcanon.ErrScheme):
			res.drop(extract.DropScheme, 1)
			continue
		case errors.Is(err, urlcanon.ErrTooLong):
			res.drop(extract.DropTooLong, 1)
			continue
		case err != nil:
			res.drop(extract.DropInvalid, 1)
			continue
		case seen[urlcanon.Key(u)]:
			res.drop(extract.DropDuplicate, 1)
			continue
		}
		seen[urlcanon.Key(u)] = true
		host, err := urlcanon.CanonicalKey(u)
		if err != nil {
			res.drop(DropKey, 1)
			continue
		}
		if reason := rules.Check(res.host, u, host, true); reason != "" {
			res.drop(reason, 1)
			continue
		}
		res.outlinks++
		fp := fingerprint.URL(page.GetCrawlId(), u)
		if p.recent.Published(fp, res.linkDepth) {
			res.drop(DropPublished, 1)
			continue
		}
		d := &crawlv1.DiscoveredURL{
			CrawlId:      page.GetCrawlId(),
			Url:          u,
			Depth:        res.linkDepth,
			ParentUrl:    pageURL,
			DiscoveredAt: now,
			Source:       crawlv1.Source_SOURCE_SITEMAP,
		}
		if !e.Lastmod.IsZero() {
			d.Lastmod = timestamppb.New(e.Lastmod)
		}
		if e.HasPriority {
			d.SitemapPriority = proto.Float32(e.Priority)
		}
		msg, err := kafkaio.NewMessage(p.topics.Discovered, []byte(host), d)
		if err != nil {
			res.drop(DropKey, 1)
			continue
		}
		res.links = append(res.links, msg)
		res.linkFPs = append(res.linkFPs, fp)
	}
}
