package doctext

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/klippa-app/go-pdfium"
	"github.com/klippa-app/go-pdfium/enums"
	pdfiumerrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// reuseBelow is the most WebAssembly memory an instance may hold to be
// kept for the next PDF.
const reuseBelow = 40 << 20

// pdfRuntime is PDFium compiled to WebAssembly: one wazero runtime and one
// compiled module per process, and module instances (about 1 ms and 18 MB
// to make) kept for the next PDF after a PDF read without error, while they
// hold at most reuseBelow of memory (a WebAssembly memory never shrinks);
// an instance that failed, timed out or grew past that is thrown away.
type pdfRuntime struct {
	pool   pdfium.Pool
	cache  wazero.CompilationCache
	memory uint64 // the WebAssembly memory limit, bytes
}

// startPDF compiles PDFium (or loads it from cfg.CacheDir).
func startPDF(cfg Config) (*pdfRuntime, error) {
	rc := wazero.NewRuntimeConfig().
		// The module lowers setjmp/longjmp to exception handling.
		WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
		// A stuck call ends when its instance's context is cancelled.
		WithCloseOnContextDone(true).
		WithMemoryLimitPages(uint32(min(cfg.PDFMemory>>16, 65536)))
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("create pdf cache dir: %w", err)
		}
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("open pdf cache dir: %w", err)
		}
		cache = c
		rc = rc.WithCompilationCache(c)
	}
	pool, err := webassembly.Init(webassembly.Config{
		MinIdle:       0,
		MaxIdle:       cfg.PDFWorkers,
		MaxTotal:      cfg.PDFWorkers,
		ReuseWorkers:  true,
		RuntimeConfig: rc,
		// No file system: a PDF is read from memory only.
		FSConfig: wazero.NewFSConfig(),
		Stdout:   io.Discard,
		Stderr:   io.Discard,
	})
	if err != nil {
		if cache != nil {
			// Releases what was compiled into it, if anything: the
			// start's error is the one to report.
			_ = cache.Close(context.Background())
		}
		return nil, fmt.Errorf("start pdfium: %w", err)
	}
	return &pdfRuntime{pool: pool, cache: cache, memory: uint64(min(cfg.PDFMemory>>16, 65536)) << 16}, nil
}

func (r *pdfRuntime) close() error {
	err := r.pool.Close()
	if r.cache != nil {
		if cerr := r.cache.Close(context.Background()); err == nil {
			err = cerr
		}
	}
	return err
}

// extract reads one PDF into out. ctx carries the document's deadline: when
// it ends, the instance is killed, which ends a call in progress.
func (r *pdfRuntime) extract(ctx context.Context, body []byte, out *collector) (err error) {
	inst, err := r.pool.GetInstanceWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return errorf(KindTimeout, fmt.Errorf("wait for a pdf worker: %w", ctx.Err()))
		}
		return fmt.Errorf("get pdf worker: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = inst.Kill() })
	defer func() {
		if r := recover(); r != nil {
			// The instance may be in any state: throw it away.
			if stop() {
				_ = inst.Kill()
			}
			panic(r)
		}
	}()
	p := &pdfReader{inst: inst, out: out, body: body, memory: r.memory}
	err = p.read(ctx)
	if stop() {
		size, ok := wasmMemorySize(inst)
		if err == nil && ok && size <= reuseBelow {
			// Back to the pool, for the next PDF.
			_ = inst.Close()
		} else {
			// After an error, or holding much memory: thrown away.
			_ = inst.Kill()
		}
	}
	return err
}

// pdfReader reads one PDF with one instance, within one extract call.
//
// The handles it opens (document, pages, text pages, web links) live in
// the instance's memory, and their deferred closes ignore errors: after an
// error the instance is killed, and an instance returned to the pool
// closes whatever documents are still open in it; and a failed close loses
// no text, read before it.
type pdfReader struct {
	inst   pdfium.Pdfium
	out    *collector
	body   []byte
	memory uint64
}

// read reads the document into p.out. ctx is the document's: its end
// stops the reading between pages (and extract kills the instance then,
// which ends a call in progress).
func (p *pdfReader) read(ctx context.Context) error {
	opened, err := p.inst.OpenDocument(&requests.OpenDocument{File: &p.body})
	if err != nil {
		return p.classify(ctx, "open pdf", err)
	}
	doc := opened.Document
	defer func() { _, _ = p.inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: doc}) }()
	p.meta(doc)
	count, err := p.inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: doc})
	if err != nil {
		return p.classify(ctx, "count pages", err)
	}
	p.out.props.Pages = count.PageCount
	if count.PageCount == 0 && !hasEOF(p.body) {
		return errorf(KindTruncated, errors.New("pdf has no pages and no end"))
	}
	n := count.PageCount
	if n > p.out.lim.MaxPages {
		n = p.out.lim.MaxPages
		p.out.trunc = true
	}
	for i := 0; i < n && !p.out.full; i++ {
		if err := ctx.Err(); err != nil {
			return errorf(KindTimeout, err)
		}
		if err := p.page(doc, i); err != nil {
			return p.classify(ctx, fmt.Sprintf("read page %d", i+1), err)
		}
	}
	if !hasEOF(p.body) {
		// PDFium rebuilds what it can of a cut file; say it was cut.
		return errorf(KindTruncated, errors.New("pdf ends without %%EOF"))
	}
	return nil
}

// meta reads the document information dictionary.
func (p *pdfReader) meta(doc references.FPDF_DOCUMENT) {
	get := func(tag string) string {
		res, err := p.inst.FPDF_GetMetaText(&requests.FPDF_GetMetaText{Document: doc, Tag: tag})
		if err != nil {
			return ""
		}
		return strings.TrimSpace(strings.ToValidUTF8(res.Value, ""))
	}
	p.out.title = get("Title")
	pr := &p.out.props
	pr.Author = get("Author")
	pr.Subject = get("Subject")
	pr.Keywords = get("Keywords")
	pr.Creator = get("Creator")
	pr.Producer = get("Producer")
	pr.Created = parsePDFDate(get("CreationDate"))
	pr.Modified = parsePDFDate(get("ModDate"))
}

// page reads one page's text and links.
func (p *pdfReader) page(doc references.FPDF_DOCUMENT, i int) error {
	pg, err := p.inst.FPDF_LoadPage(&requests.FPDF_LoadPage{Document: doc, Index: i})
	if err != nil {
		return err
	}
	defer func() { _, _ = p.inst.FPDF_ClosePage(&requests.FPDF_ClosePage{Page: pg.Page}) }()
	page := requests.Page{ByReference: &pg.Page}

	tp, err := p.inst.FPDFText_LoadPage(&requests.FPDFText_LoadPage{Page: page})
	if err != nil {
		return err
	}
	defer func() { _, _ = p.inst.FPDFText_ClosePage(&requests.FPDFText_ClosePage{TextPage: tp.TextPage}) }()
	cc, err := p.inst.FPDFText_CountChars(&requests.FPDFText_CountChars{TextPage: tp.TextPage})
	if err != nil {
		return err
	}
	// A character is at least one byte of text: read no more than fits.
	if count := min(cc.Count, p.out.room()); count > 0 {
		tx, err := p.inst.FPDFText_GetText(&requests.FPDFText_GetText{TextPage: tp.TextPage, Count: count})
		if err != nil {
			return err
		}
		p.out.write(cleanPDFText(tx.Text))
		if count < cc.Count {
			p.out.full, p.out.trunc = true, true
		}
	}
	p.out.endPage()

	// Link annotations with a URI action.
	pos := 0
	for range 10000 {
		en, err := p.inst.FPDFLink_Enumerate(&requests.FPDFLink_Enumerate{Page: page, StartPos: pos})
		if err != nil || en.Link == nil || en.NextStartPos == nil {
			break
		}
		pos = *en.NextStartPos
		act, err := p.inst.FPDFLink_GetAction(&requests.FPDFLink_GetAction{Link: *en.Link})
		if err != nil || act.Action == nil {
			continue
		}
		typ, err := p.inst.FPDFAction_GetType(&requests.FPDFAction_GetType{Action: *act.Action})
		if err != nil || typ.Type != enums.FPDF_ACTION_ACTION_URI {
			continue
		}
		uri, err := p.inst.FPDFAction_GetURIPath(&requests.FPDFAction_GetURIPath{Document: doc, Action: *act.Action})
		if err == nil && uri.URIPath != nil {
			p.out.link(*uri.URIPath)
		}
	}
	// URLs written in the text, as PDFium finds them.
	wl, err := p.inst.FPDFLink_LoadWebLinks(&requests.FPDFLink_LoadWebLinks{TextPage: tp.TextPage})
	if err != nil {
		return nil
	}
	defer func() { _, _ = p.inst.FPDFLink_CloseWebLinks(&requests.FPDFLink_CloseWebLinks{PageLink: wl.PageLink}) }()
	wc, err := p.inst.FPDFLink_CountWebLinks(&requests.FPDFLink_CountWebLinks{PageLink: wl.PageLink})
	if err != nil {
		return nil
	}
	for j := range min(wc.Count, 10000) {
		u, err := p.inst.FPDFLink_GetURL(&requests.FPDFLink_GetURL{PageLink: wl.PageLink, Index: j})
		if err == nil && (strings.HasPrefix(u.URL, "http://") || strings.HasPrefix(u.URL, "https://")) {
			p.out.link(u.URL)
		}
	}
	return nil
}

// cleanPDFText turns PDFium's text into the collector's: "\r\n" line ends
// become "\n", PDFium's markers of soft hyphens and NULs go.
func cleanPDFText(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.Map(func(r rune) rune {
		switch r {
		case 0, 0xfffe, 0x02:
			return -1
		}
		return r
	}, s)
	return strings.ToValidUTF8(s, "")
}

// classify names the kind of a PDFium error; ctx is the document's.
func (p *pdfReader) classify(ctx context.Context, what string, err error) error {
	var de *Error
	if errors.As(err, &de) {
		return err
	}
	err = fmt.Errorf("%s: %w", what, err)
	switch {
	case ctx.Err() != nil:
		return errorf(KindTimeout, err)
	case errors.Is(err, pdfiumerrors.ErrPassword), errors.Is(err, pdfiumerrors.ErrSecurity):
		return errorf(KindEncrypted, err)
	case p.outOfMemory():
		return errorf(KindTooLarge, err)
	case errors.Is(err, pdfiumerrors.ErrFormat), errors.Is(err, pdfiumerrors.ErrFile):
		if !hasEOF(p.body) {
			return errorf(KindTruncated, err)
		}
		return errorf(KindMalformed, err)
	}
	return errorf(KindMalformed, err)
}

// outOfMemory tells whether the instance's memory reached its limit: PDFium
// aborts (a trap) when an allocation fails, and allocations fail there.
func (p *pdfReader) outOfMemory() bool {
	size, ok := wasmMemorySize(p.inst)
	return ok && size+8<<20 >= p.memory
}

// wasmMemorySize returns the size of a go-pdfium WebAssembly instance's
// linear memory. go-pdfium keeps the module in an exported field of an
// internal type (PdfiumImplementation.Module), reached by reflection.
func wasmMemorySize(inst pdfium.Pdfium) (size uint64, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	v := reflect.ValueOf(inst.GetImplementation())
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	mod := v.FieldByName("Module")
	if !mod.IsValid() || mod.IsNil() {
		return 0, false
	}
	mem := mod.MethodByName("Memory").Call(nil)[0]
	if mem.IsNil() {
		return 0, false
	}
	return mem.MethodByName("Size").Call(nil)[0].Uint(), true
}

// hasEOF reports whether a PDF's last KiB holds its end marker.
func hasEOF(body []byte) bool {
	return bytes.Contains(body[max(0, len(body)-1024):], []byte("%%EOF"))
}

var pdfDate = regexp.MustCompile(`^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?(Z|[+-]\d{2}'?\d{2}'?|[+-]\d{2})?`)

// parsePDFDate reads a PDF date (D:YYYYMMDDHHmmSSOHH'mm'); the zero time
// when it is not one.
func parsePDFDate(s string) time.Time {
	m := pdfDate.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return time.Time{}
	}
	num := func(v string, def int) int {
		if v == "" {
			return def
		}
		n := 0
		for _, c := range v {
			n = n*10 + int(c-'0')
		}
		return n
	}
	loc := time.UTC
	if z := strings.ReplaceAll(m[7], "'", ""); z != "" && z != "Z" {
		off := num(z[1:3], 0) * 3600
		if len(z) >= 5 {
			off += num(z[3:5], 0) * 60
		}
		if z[0] == '-' {
			off = -off
		}
		loc = time.FixedZone("", off)
	}
	mon, day := num(m[2], 1), num(m[3], 1)
	if mon < 1 || mon > 12 || day < 1 || day > 31 {
		return time.Time{}
	}
	return time.Date(num(m[1], 0), time.Month(mon), day, num(m[4], 0), num(m[5], 0), num(m[6], 0), 0, loc)
}
