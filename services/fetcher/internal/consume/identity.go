package consume

import (
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/identity"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// ident is how the requests of a crawl present it (its specification's
// crawlv1.Identity): sent with every request of the crawl, robots.txt
// included. The zero value is the fetcher's own: --user-agent, no extra
// header.
type ident struct {
	userAgent string            // "": the fetcher's --user-agent
	agent     string            // userAgent's robots.txt product token; "": the robots cache's
	headers   []identity.Header // extra headers, checked
}

// robotsAs is who t's turn asks for robots.txt as.
func (id ident) robotsAs() robots.As { return robots.As{UserAgent: id.userAgent, Header: id.headers} }

// maxIdentities bounds the crawls whose identity is kept checked; beyond
// it the table starts over (each crawl's is checked again once).
const maxIdentities = 4096

// identities keeps the checked identity of each crawl that has one, per
// specification revision, so a request costs a map look-up, not a check.
// Safe for concurrent use.
type identities struct {
	mu      sync.Mutex
	byCrawl map[string]identEntry
}

type identEntry struct {
	spec *crawlv1.CrawlSpec // the revision id was checked from
	id   ident
}

// identityOf returns the identity of crawl's requests. A user agent or a
// header the seeder would refuse (a specification published by something
// else) is not sent: the crawl goes with the fetcher's user agent, or
// without that header, and a warning says so once per revision.
func (s *Service) identityOf(crawl string) ident {
	if s.opts.Crawls == nil {
		return ident{}
	}
	spec := s.opts.Crawls.Get(crawl)
	if spec.GetIdentity() == nil {
		return ident{}
	}
	s.idents.mu.Lock()
	defer s.idents.mu.Unlock()
	if e, ok := s.idents.byCrawl[crawl]; ok && e.spec == spec {
		return e.id
	}
	id, refused := checkIdentity(spec.GetIdentity())
	if len(refused) > 0 {
		s.log.Warn("crawl identity partly refused, sent without it", telemetry.Crawl(crawl), zap.Strings("refused", refused))
	}
	if s.idents.byCrawl == nil || len(s.idents.byCrawl) >= maxIdentities {
		s.idents.byCrawl = make(map[string]identEntry)
	}
	s.idents.byCrawl[crawl] = identEntry{spec: spec, id: id}
	return id
}

// checkIdentity returns what of p may be sent (libs/identity's rules) and
// why the rest may not.
func checkIdentity(p *crawlv1.Identity) (id ident, refused []string) {
	if ua := strings.TrimSpace(p.GetUserAgent()); ua != "" {
		if err := identity.CheckUserAgent(ua); err != nil {
			refused = append(refused, "user agent: "+err.Error())
		} else {
			id.userAgent, id.agent = ua, robots.ProductToken(ua)
		}
	}
	for _, h := range p.GetHeaders() {
		checked, err := identity.CheckHeader(h.GetName(), h.GetValue())
		if err != nil {
			refused = append(refused, err.Error())
			continue
		}
		id.headers = append(id.headers, checked)
	}
	return id, refused
}

// keptTypes are the media types beyond text whose bodies crawl keeps
// (CrawlSpec.documents): PDFs, office files, for the parsers to read.
func (s *Service) keptTypes(crawl string) []string {
	if s.opts.Crawls == nil {
		return nil
	}
	return s.opts.Crawls.Get(crawl).GetDocuments().GetContentTypes()
}
