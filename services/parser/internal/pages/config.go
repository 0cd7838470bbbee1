package pages

import (
	"flag"
	"fmt"
	"time"

	"github.com/trawl-crawler/trawl/libs/simhash"
	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/parser/internal/extract"
	"github.com/trawl-crawler/trawl/services/parser/internal/traps"
)

// Config tunes the processor.
type Config struct {
	MaxOutlinks         int    // flag max-outlinks: links published per page (default 1000)
	MaxTextBytes        int    // flag max-text-bytes: visible text stored per page (default 1 MiB)
	BatchSize           int    // flag batch-size: fetched pages handled together per partition (default DefaultBatchSize)
	MaxURLLength        int    // flag max-url-length: longest outlink published (default 2048)
	MaxRepeatedSegments int    // flag max-repeated-segments: trap guard (default 3, 0 = off)
	FollowDuplicates    bool   // flag follow-duplicates: for crawls without a spec (default true)
	SERPConfig          string // flag serp-config: JSON file of search engines added to the presets
	RecentLinks         int    // flag recent-links: outlinks remembered as published (0 = off)
	InLinks             bool   // flag in-links: count the pages linking each remembered link and publish it again with in_links when the count doubles (default true)
	ResolveCache        int    // flag resolve-cache: link resolutions remembered across pages (0 = off)
	PublishDocuments    bool   // flag publish-documents: also produce every document to the documents topic
	NearDistance        int    // flag near-duplicate-distance: simhash bits within which a document nearly duplicates an earlier one, for crawls whose spec does not say (0 = off)
	StoreLinks          bool   // flag store-links: keep every in-scope link of a page in the links table
	DetectLanguage      bool   // flag detect-language: detect each document's language from its text (default true; 2-25 µs a page)
	TrapAllowance       int    // flag trap-allowance: repeats of a URL family in a row before its new URLs one step on are suspected as a trap (0 = off)
	// Documents that are not HTML (PDF, office files; a crawl's
	// documents.content_types): each is read within DocumentTimeout and
	// DocumentMaxPages; PDFCacheDir keeps PDFium's compiled module.
	DocumentTimeout  time.Duration // flag document-timeout
	DocumentMaxPages int           // flag document-max-pages
	PDFCacheDir      string        // flag pdf-cache-dir
}

// Defaults of Config.
const (
	// DefaultBatchSize: a batch's lookups (content fingerprints, near
	// duplicates) and the publish of its links are round trips the
	// partition waits on, once per batch. At 50 pages a partition of a
	// few busy hosts parsed about 400 pages a second with the core two
	// thirds idle, and held back the whole crawl (the fetcher pauses for
	// its oldest unstored page); at 200 the round trips are a quarter as
	// many. A batch's bodies are in memory while it is parsed (200 pages
	// of 10–30 KB: 4 MB a partition).
	DefaultBatchSize = 200
	// DocumentBatchRows and DocumentBatchBytes are the most documents,
	// and the most bytes of them (their text and fields,
	// chstore.Documents.Size), inserted together; twice as much may wait
	// (the parser's memory for documents: 32 MiB, whatever their size).
	// Each insert is a part ClickHouse merges: at 500 documents (4 MiB
	// of the bench web's pages) the text was rewritten 2.6 times by
	// merges at 1.5 M pages, the most of ClickHouse's work. 16 MiB is
	// about 1 900 of those pages.
	DocumentBatchRows          = 4000
	DocumentBatchBytes         = 16 << 20
	DefaultMaxURLLength        = 2048
	DefaultMaxRepeatedSegments = 3
	// DefaultRecentLinks: slots of the recent-links table, 8 bytes each
	// (32 MiB at most; it grows from 256 KiB as links come). At 1 << 20
	// a crawl of 1.5 M distinct URLs overflowed it: 12 links a page
	// were published, 11 of them URLs the scheduler already had, each a
	// record through the broker and a decode and a lookup there. 1 << 22
	// holds 1.5 M at under two fifths full.
	DefaultRecentLinks      = 1 << 22
	DefaultResolveCache     = 1 << 14 // about 4 MiB
	DefaultDocumentTimeout  = 10 * time.Second
	DefaultDocumentMaxPages = 500
)

// RegisterFlags binds the fields to flags with defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.MaxOutlinks, "max-outlinks", extract.DefaultMaxOutlinks, "outlinks published per page; the rest are dropped and counted (a crawl's scope can lower it)")
	fs.IntVar(&c.MaxTextBytes, "max-text-bytes", extract.DefaultMaxTextBytes, "visible text stored per page, in bytes (cut on a UTF-8 boundary)")
	fs.IntVar(&c.BatchSize, "batch-size", DefaultBatchSize, "fetched pages handled together per partition; twice as many may wait for their rows' insert (bounds memory: 2 × batch-size × partitions × page size)")
	fs.IntVar(&c.MaxURLLength, "max-url-length", DefaultMaxURLLength, "longest outlink published, in bytes (a crawl's scope can override it)")
	fs.IntVar(&c.MaxRepeatedSegments, "max-repeated-segments", DefaultMaxRepeatedSegments, "trap guard: drop outlinks whose path repeats one segment more often than this (0 = off)")
	fs.BoolVar(&c.FollowDuplicates, "follow-duplicates", true, "follow the links of pages whose text duplicates an earlier page, for crawls without a spec")
	fs.StringVar(&c.SERPConfig, "serp-config", "", "JSON file of search engines ([{name, url_pattern, results}]) added to the built-in presets")
	fs.IntVar(&c.RecentLinks, "recent-links", DefaultRecentLinks, "outlinks remembered as published, at most (8 bytes each; the table starts at 256 KiB and grows to this, doubling when a quarter is taken) so that a link repeated on many pages is published once; 0 disables")
	fs.BoolVar(&c.InLinks, "in-links", true, "count, approximately, the pages that link each link the recent-links table remembers, and publish the link again with in_links at 2, 4, 8, … (the scheduler raises a URL's priority by its in-links; about log2 n records for a link n pages link); needs --recent-links")
	fs.BoolVar(&c.PublishDocuments, "publish-documents", false, "also produce every document (text included) to the documents topic, for downstream consumers; ClickHouse's documents table has them either way")
	fs.IntVar(&c.NearDistance, "near-duplicate-distance", 0, fmt.Sprintf("a document whose text's simhash is at most this many bits (%d is usual) from an earlier document's of the crawl is its near duplicate, for crawls whose spec does not set near_duplicate_distance (0 = off, at most %d; it costs about a third more ClickHouse CPU per page)", simhash.NearDistance, simhash.MaxNearDistance))
	fs.BoolVar(&c.StoreLinks, "store-links", false, "keep every in-scope link of a page (source, target, anchor text, rel, position) in ClickHouse's links table: the link graph, about 30 rows per page on the bench web, three times the rows of every other table together")
	fs.BoolVar(&c.DetectLanguage, "detect-language", true, "detect each document's language from its text's first 2 KiB (documents.language_detected, next to the declared language): 2-25 µs of CPU a page, a tenth or less of the rest of the parse (a page whose best two languages score close, mostly a short one, pays whatlanggo's 0.2-1 ms); false leaves language_detected empty")
	fs.IntVar(&c.TrapAllowance, "trap-allowance", traps.DefaultAllowance, "crawler traps: after this many pages in a row of one URL family (the URL read with its numbers left out) that repeat the family's text and link nothing new but the family's next number (the next month, the next page), those new URLs are suspected and the scheduler ends them as trap_suspected (a crawl's scope.follow_traps follows them; 0 = off in every crawl; needs --recent-links)")
	fs.DurationVar(&c.DocumentTimeout, "document-timeout", DefaultDocumentTimeout, "the longest the reading of one PDF or office file may take (a crawl's documents.content_types); past it the document keeps the text read so far and parse_error timeout")
	fs.IntVar(&c.DocumentMaxPages, "document-max-pages", DefaultDocumentMaxPages, "PDF pages, slides or sheets read of one document; the rest are skipped and its text marked truncated")
	fs.StringVar(&c.PDFCacheDir, "pdf-cache-dir", "", "directory keeping PDFium's compiled WebAssembly module, so that a restarted parser's first PDF costs about 0.1 s instead of 2-10 s of compilation (empty: compiled in memory by each process, on its first PDF)")
	fs.IntVar(&c.ResolveCache, "resolve-cache", DefaultResolveCache, "link resolutions remembered across pages (about 200 bytes each), so that a link a site repeats is parsed once; 0 disables")
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case c.MaxOutlinks < 1:
		return fmt.Errorf("validate max-outlinks %d: want at least 1", c.MaxOutlinks)
	case c.MaxTextBytes < 1:
		return fmt.Errorf("validate max-text-bytes %d: want at least 1", c.MaxTextBytes)
	case c.BatchSize < 1:
		return fmt.Errorf("validate batch-size %d: want at least 1", c.BatchSize)
	case c.MaxURLLength < 16 || c.MaxURLLength > urlcanon.MaxLength:
		return fmt.Errorf("validate max-url-length %d: want 16 to %d", c.MaxURLLength, urlcanon.MaxLength)
	case c.MaxRepeatedSegments < 0:
		return fmt.Errorf("validate max-repeated-segments %d: want at least 0", c.MaxRepeatedSegments)
	case c.RecentLinks < 0 || c.RecentLinks > 1<<30:
		return fmt.Errorf("validate recent-links %d: want 0 to %d", c.RecentLinks, 1<<30)
	case c.NearDistance < 0 || c.NearDistance > simhash.MaxNearDistance:
		return fmt.Errorf("validate near-duplicate-distance %d: want 0 to %d", c.NearDistance, simhash.MaxNearDistance)
	case c.TrapAllowance < 0:
		return fmt.Errorf("validate trap-allowance %d: want at least 0", c.TrapAllowance)
	case c.DocumentTimeout < 0:
		return fmt.Errorf("validate document-timeout %s: want at least 0 (0: the default)", c.DocumentTimeout)
	case c.DocumentMaxPages < 0:
		return fmt.Errorf("validate document-max-pages %d: want at least 0 (0: the default)", c.DocumentMaxPages)
	case c.ResolveCache < 0 || c.ResolveCache > 1<<26:
		return fmt.Errorf("validate resolve-cache %d: want 0 to %d", c.ResolveCache, 1<<26)
	}
	return nil
}
