package pages

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/libs/scope"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
)

// Outcomes of one fetched page, the label values of pages_parsed_total.
const (
	OutcomeDocument    = "document"    // HTML page: links published, document stored
	OutcomeNoIndex     = "noindex"     // HTML page: links published, no document (robots noindex)
	OutcomeNotHTML     = "not_html"    // 2xx answer of another content type
	OutcomeHTTPStatus  = "http_status" // non-2xx answer
	OutcomeFetchError  = "fetch_error" // no usable answer (error_kind set)
	OutcomeInvalidURL  = "invalid_url" // the page URL itself is not crawlable
	OutcomeUndecodable = "undecodable" // the record is not a FetchedPage
	OutcomeDuplicate   = "duplicate"   // HTML page: document stored, marked a duplicate of an earlier page
	// OutcomeNearDuplicate: HTML page, document stored, its simhash within
	// the near-duplicate distance of an earlier page's.
	OutcomeNearDuplicate = "near_duplicate"
	OutcomeList          = "list"        // HTML page: not a detail page of the crawl, links published only
	OutcomeSERP          = "serp"        // search engine result page: result links published only
	OutcomeSitemap       = "sitemap"     // sitemap: listed URLs published
	OutcomeBadSitemap    = "bad_sitemap" // sitemap that could not be parsed (broken gzip, …)
	// OutcomeCarried: a 304 to the conditional request of a page an
	// earlier crawl fetched (FetchedPage.document_crawl_id): the page is
	// unchanged, that crawl's document is carried over (documents_carried),
	// no text stored, no link published (the earlier crawl's links were
	// seeded already).
	OutcomeCarried = "carried"
)

// DropKey is the links_dropped_total reason of a link whose record key
// could not be derived.
const DropKey = "key"

// DropDuplicatePage is the links_dropped_total reason of the links of a
// page whose content duplicates an earlier page, when the crawl does not
// follow duplicates.
const DropDuplicatePage = "duplicate_page"

// DropNearDuplicatePage is the links_dropped_total reason of the links of
// a page that nearly duplicates an earlier page, when the crawl does not
// follow duplicates.
const DropNearDuplicatePage = "near_duplicate_page"

// DropPublished is the links_dropped_total reason of a link this parser
// published recently at a depth as small (internal/recent), or that an
// earlier page of the same batch publishes: the scheduler would drop it as
// a duplicate. A repeat that steps the link's in-link count is published
// again instead (links_inlinks_republished_total), not dropped.
const DropPublished = "published"

// DropCancelled is the links_dropped_total reason of the links of a page
// whose crawl is cancelled (by its operator, its time limit or its
// deletion): its document is stored, its links are not published.
const DropCancelled = "cancelled"

// Metrics of the page processor. Built once per process from the service's
// registerer (names get the crawler_parser_ prefix there).
type Metrics struct {
	pages     *prometheus.CounterVec
	links     prometheus.Counter
	dropped   *prometheus.CounterVec
	duration  prometheus.Histogram
	documents prometheus.Counter
	serp      *prometheus.CounterVec
	// scopeSyncs counts the batches that caught up with the control
	// topic because a page was off its crawl's known sites (a scope grant
	// not read yet).
	scopeSyncs prometheus.Counter
	// trapLinks counts the links published marked as a suspected trap
	// (DiscoveredURL.trap_family), which the scheduler ends.
	trapLinks prometheus.Counter
	// inLinks counts the links published again with in_links (--in-links).
	inLinks prometheus.Counter
	// extractPages counts the documents an extraction rule was applied
	// to, by rule name; extractFields the fields found and missing.
	extractPages  *prometheus.CounterVec
	extractFields *prometheus.CounterVec
	// documentsRead counts the documents that are not HTML read, by
	// format and result; documentDuration times each.
	documentsRead    *prometheus.CounterVec
	documentDuration prometheus.Histogram
	// batchSteps times the steps of a batch (Step*): where a partition
	// that parses slower than its CPU allows waits.
	batchSteps *prometheus.HistogramVec
}

// Steps of a batch, the label values of batch_step_duration_seconds.
const (
	StepParse   = "parse"   // decode, catch up with the specifications, extract every page
	StepLookup  = "lookup"  // the exact and near duplicate lookups (ClickHouse, coalesced across partitions)
	StepPublish = "publish" // outlinks and documents produced, acknowledged by the broker
	StepStore   = "store"   // the batch's rows inserted (in the background, overlapping the next batches), until its records are acked
)

// NewMetrics registers the processor's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		pages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pages_parsed_total",
			Help: "Fetched pages consumed, by outcome.",
		}, []string{"outcome"}),
		links: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "links_extracted_total",
			Help: "Outlinks published to the discovered topic.",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "links_dropped_total",
			Help: "Links found in pages but not published, by reason.",
		}, []string{"reason"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "parse_duration_seconds",
			Help:    "Time to extract links and text from one HTML page.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs … 3.3s
		}),
		documents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "documents_written_total",
			Help: "Document rows written to ClickHouse (and published to the documents topic).",
		}),
		serp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "serp_pages_total",
			Help: "Search engine result pages parsed, by engine (presets and --serp-config names).",
		}, []string{"engine"}),
		scopeSyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scope_syncs_total",
			Help: "Batches that caught up with the control topic before parsing, because a page was on a host off its crawl's known sites (a scope grant not read yet).",
		}),
		trapLinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "links_trap_suspected_total",
			Help: "Links published marked as a suspected crawler trap: they lead into the URL family of a page that repeats the family's earlier pages and brought nothing new (the scheduler ends them as trap_suspected).",
		}),
		inLinks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "links_inlinks_republished_total",
			Help: "Links published again, with in_links, because the count of the pages seen linking them (the recent-links table's, approximate) reached the next power of two: not counted in links_extracted_total.",
		}),
		extractPages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "extract_pages_total",
			Help: "Documents a crawl's extraction rule was applied to, by rule name (CrawlSpec.extract; the first rule matching a page).",
		}, []string{"rule"}),
		extractFields: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "extract_fields_total",
			Help: "Fields of the extraction rules applied, by rule name and result: found, or missing (the selector matched nothing of the field's type; document_meta.extract_missing names them).",
		}, []string{"rule", "result"}),
		documentsRead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "documents_read_total",
			Help: "Documents that are not HTML read (a crawl's documents.content_types), by format (pdf, docx, xlsx, pptx, odt, ods, odp) and result: ok, or the kind of error that stopped the reading (encrypted, truncated, malformed, too_large, timeout, unsupported, panic; document_meta.parse_error).",
		}, []string{"format", "result"}),
		documentDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "document_read_duration_seconds",
			Help:    "Time to read one document that is not HTML (PDF, office file), its wait for a PDF worker included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms … 33s
		}),
		batchSteps: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "batch_step_duration_seconds",
			Help:    "Time of each step of a batch of fetched pages, by step: parse (CPU), lookup (the duplicate lookups' round trip), publish (the broker's acknowledgement), store (the rows' insert, in the background, until the records are acked). A partition whose lookup and publish take as long as its parse waits as much as it works.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms … 33s
		}, []string{"step"}),
	}
	for _, c := range []prometheus.Collector{m.pages, m.links, m.dropped, m.duration, m.documents, m.serp, m.scopeSyncs, m.trapLinks, m.inLinks,
		m.extractPages, m.extractFields, m.documentsRead, m.documentDuration, m.batchSteps} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register parser metrics: %w", err)
		}
	}
	// Expose every bounded label value from the start, at zero.
	for _, o := range []string{OutcomeDocument, OutcomeNoIndex, OutcomeNotHTML, OutcomeHTTPStatus,
		OutcomeFetchError, OutcomeInvalidURL, OutcomeUndecodable, OutcomeDuplicate, OutcomeList, OutcomeSERP,
		OutcomeSitemap, OutcomeBadSitemap, OutcomeCarried} {
		m.pages.WithLabelValues(o)
	}
	for _, r := range []string{extract.DropInvalid, extract.DropScheme, extract.DropTooLong, extract.DropNoFollow,
		extract.DropSelf, extract.DropDuplicate, extract.DropOverCap, DropKey, DropDuplicatePage, DropPublished, DropCancelled,
		scope.DropOutOfScope, scope.DropFiltered, scope.DropTrapGuard} {
		m.dropped.WithLabelValues(r)
	}
	for _, st := range []string{StepParse, StepLookup, StepPublish, StepStore} {
		m.batchSteps.WithLabelValues(st)
	}
	return m, nil
}
