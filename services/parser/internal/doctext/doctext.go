// Package doctext reads the text, title, properties and links of documents
// that are not HTML: PDF (PDFium compiled to WebAssembly, run in-process by
// wazero), and the office formats docx, xlsx, pptx, odt, ods and odp (zip
// archives of XML, read with archive/zip and encoding/xml).
//
// An Extractor holds the one PDFium runtime of a process, created on the
// first PDF, so that a process that reads no PDF pays nothing for it. Every
// document is read within Limits (time, text, decompressed bytes, pages);
// whatever stops a document is an *Error whose Kind is one of the Kind*
// constants, and no input makes Extract panic.
package doctext

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Doc is what a document says.
type Doc struct {
	// Title is the document's own title (its metadata), "" when it has none.
	Title string `json:"title,omitempty"`
	// Text is the text in reading order: paragraphs and lines end in "\n",
	// table cells are separated by "\t", pages, slides and sheets by a blank
	// line.
	Text string `json:"text,omitempty"`
	// Properties are the document's metadata.
	Properties Properties `json:"properties"`
	// Links are the absolute http(s) URLs the document links to (link
	// annotations and hyperlinks, and the bare URLs of a PDF's text), each
	// once, in the order they first appear.
	Links []string `json:"links,omitempty"`
	// Truncated says that Text stopped at Limits.MaxTextBytes or that pages
	// past Limits.MaxPages were not read.
	Truncated bool `json:"truncated,omitempty"`
}

// Properties are a document's metadata, as one JSON object for
// documents.properties. Empty fields are left out.
type Properties struct {
	Author   string    `json:"author,omitempty"`
	Created  time.Time `json:"created,omitzero"`
	Modified time.Time `json:"modified,omitzero"`
	// Pages counts a PDF's or a text document's pages, a presentation's
	// slides, a spreadsheet's sheets.
	Pages    int    `json:"pages,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Keywords string `json:"keywords,omitempty"`
	// Creator is the application that made the document, Producer the one
	// that wrote the PDF (they often differ: Writer, LibreOffice 7.4).
	Creator  string `json:"creator,omitempty"`
	Producer string `json:"producer,omitempty"`
}

// Limits bound the reading of one document. Zero fields take the defaults
// of DefaultLimits.
type Limits struct {
	// MaxTextBytes is the most text kept; past it the document is
	// Truncated (not an error).
	MaxTextBytes int
	// MaxTime bounds the reading of one document, waiting for a PDF worker
	// included (the start of the process's PDF runtime, on its first PDF,
	// is not): past it Extract returns an error of kind "timeout" and the
	// text read so far.
	MaxTime time.Duration
	// MaxDecompressed is the most bytes an office file's zip entries may
	// inflate to, all entries together: past it, kind "too_large".
	MaxDecompressed int64
	// MaxEntries is the most entries an office file's zip may hold.
	MaxEntries int
	// MaxPages is the most PDF pages, slides or sheets read; later ones are
	// skipped and the document is Truncated.
	MaxPages int
}

// DefaultLimits are the limits used for zero fields.
var DefaultLimits = Limits{
	MaxTextBytes:    4 << 20,
	MaxTime:         20 * time.Second,
	MaxDecompressed: 64 << 20,
	MaxEntries:      10000,
	MaxPages:        2000,
}

func (l Limits) withDefaults() Limits {
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = DefaultLimits.MaxTextBytes
	}
	if l.MaxTime <= 0 {
		l.MaxTime = DefaultLimits.MaxTime
	}
	if l.MaxDecompressed <= 0 {
		l.MaxDecompressed = DefaultLimits.MaxDecompressed
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = DefaultLimits.MaxEntries
	}
	if l.MaxPages <= 0 {
		l.MaxPages = DefaultLimits.MaxPages
	}
	return l
}

// Config sets up an Extractor.
type Config struct {
	// CacheDir, when set, keeps PDFium's compiled WebAssembly module on
	// disk: the first PDF of a process then costs about 0.1 s instead of
	// 2-10 s of compilation (and ~300 MB of transient memory). The
	// directory is created if missing; "" compiles in memory every time.
	CacheDir string
	// PDFMemory bounds the WebAssembly memory of each PDF being read
	// (default 128 MiB, at least 32 MiB): a PDF that needs more ends in
	// kind "too_large". It must exceed the largest PDF body: the body is
	// copied into that memory.
	// The Go heap holds that memory, and up to twice as much more while it
	// grows (copies) and until the collector frees it.
	PDFMemory int64
	// PDFWorkers is the most PDFs read at once (default GOMAXPROCS); more
	// wait, within their MaxTime.
	PDFWorkers int
}

// Extractor reads documents. It is safe for concurrent use; Close releases
// the PDF runtime.
type Extractor struct {
	cfg Config

	mu     sync.Mutex
	pdf    *pdfRuntime // nil until the first PDF
	pdfErr error
	closed bool
}

// New returns an Extractor; nothing is started until the first PDF.
func New(cfg Config) *Extractor {
	switch {
	case cfg.PDFMemory <= 0:
		cfg.PDFMemory = 128 << 20
	case cfg.PDFMemory < 32<<20:
		// PDFium's initial memory is 18 MB.
		cfg.PDFMemory = 32 << 20
	}
	if cfg.PDFWorkers <= 0 {
		cfg.PDFWorkers = runtime.GOMAXPROCS(0)
	}
	return &Extractor{cfg: cfg}
}

// Close releases the PDF runtime, if one was started. Extract must not be
// called after Close.
func (e *Extractor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if e.pdf == nil {
		return nil
	}
	err := e.pdf.close()
	e.pdf = nil
	return err
}

// pdfRuntime returns the process's PDF runtime, starting it on first use.
// A failure to start is kept: every later PDF gets the same error.
func (e *Extractor) pdfRuntime() (*pdfRuntime, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("extractor closed")
	}
	if e.pdf == nil && e.pdfErr == nil {
		e.pdf, e.pdfErr = startPDF(e.cfg)
	}
	return e.pdf, e.pdfErr
}

// Extract reads body, a document of the given media type (the
// Content-Type header, parameters allowed; "" or a generic type make Kind
// look at the bytes), and resolves its relative links against base (nil:
// relative links are dropped).
//
// On error the Doc still holds what was read before the error (text, title,
// properties), and ErrorKind(err) names the cause for
// document_meta.parse_error.
func (e *Extractor) Extract(ctx context.Context, contentType string, body []byte, base *url.URL, lim Limits) (doc Doc, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Kind: KindPanic, Err: fmt.Errorf("%v\n%s", r, debug.Stack())}
		}
	}()
	lim = lim.withDefaults()
	kind := Kind(contentType, body)
	var rt *pdfRuntime
	if kind == FormatPDF {
		// The process's first PDF compiles PDFium (2 s of CPU, more on a
		// busy core): the runtime is the process's, not the document's,
		// so its start is not charged to the document's time.
		if rt, err = e.pdfRuntime(); err != nil {
			return doc, &Error{Kind: KindUnsupported, Err: fmt.Errorf("start pdf runtime: %w", err)}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, lim.MaxTime)
	defer cancel()
	out := newCollector(base, lim)
	switch kind {
	case FormatPDF:
		err = rt.extract(ctx, body, out)
	case FormatDOCX, FormatXLSX, FormatPPTX:
		err = readOOXML(ctx, kind, body, out)
	case FormatODT, FormatODS, FormatODP:
		err = readODF(ctx, kind, body, out)
	default:
		err = &Error{Kind: KindUnsupported, Err: fmt.Errorf("unsupported document type %q", contentType)}
	}
	doc = out.doc()
	if err != nil && ctx.Err() != nil && ErrorKind(err) != KindPanic {
		// Whatever the reader said last, the clock stopped it.
		err = &Error{Kind: KindTimeout, Err: fmt.Errorf("read %s: %w", kind, ctx.Err())}
	}
	return doc, err
}
