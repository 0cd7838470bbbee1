package warc

import (
	"net"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// Content types of the records' blocks.
const (
	httpRequestType  = "application/http;msgtype=request"
	httpResponseType = "application/http;msgtype=response"
)

// attemptField names the attempt a response, revisit or resource record
// archives (crawl, URL fingerprint, attempt, scheduling time): a record
// written twice for one attempt (a re-delivery after a crash) is a
// duplicate, counted.
const attemptField = "Trawl-Attempt"

// attemptKey identifies one attempt of a fetch request: a re-delivered
// request has the same key, a retry or a later revisit another.
func attemptKey(req *crawlv1.FetchRequest) string {
	var sched int64
	if t := req.GetScheduledAt(); t != nil {
		sched = t.AsTime().UnixMilli()
	}
	b := make([]byte, 0, len(req.GetCrawlId())+48)
	b = append(append(b, req.GetCrawlId()...), ' ')
	b = append(strconv.AppendUint(b, req.GetUrlFp(), 10), ' ')
	b = append(strconv.AppendInt(b, int64(req.GetAttempt()), 10), ' ')
	return string(strconv.AppendInt(b, sched, 10))
}

// revisitTarget is an archived payload that later identical payloads
// refer to.
type revisitTarget struct {
	id, uri, date string
}

// built is the records of one fetch, in file order, and the index of the
// one that fetch_log points at (response, revisit or resource).
type built struct {
	recs []*record
	main int
	// digest is the payload digest to remember for later revisits ("" to
	// remember none), target the main record.
	digest string
	// status and mime of the main record's CDXJ line (liveIndex).
	status, mime string
	// key is the fetch's attemptKey.
	key string
}

// build returns the records of the fetch of req answered by res. The
// caller holds gowarcMu (w.enc).
func (w *Writer) build(req *crawlv1.FetchRequest, res *httpfetch.Response) built {
	var b built
	ex := res.Exchange
	uri := req.GetUrl()
	date := warcDate(res.Start)
	if ex.FTP {
		rec := w.resource(uri, date, res)
		b.recs, b.main = []*record{rec}, 0
		b.mime = mediaType(rec.contentType)
	} else {
		b.recs = append(b.recs, &record{typ: "request", uri: uri, date: date, id: w.enc.newID(), contentType: httpRequestType,
			parts: [][]byte{requestBlock(ex)}, payloadDigest: emptyDigest})
		hdr := responseHeader(ex)
		rec, digest := w.response(uri, date, hdr, res)
		b.recs, b.main, b.digest = append(b.recs, rec), 1, digest
		b.status = statusOf(hdr)
		b.mime = mediaType(ex.Header.Get("Content-Type"))
		if rec.typ == "revisit" {
			b.mime = "warc/revisit"
		}
	}
	main := b.recs[b.main]
	b.key = attemptKey(req)
	main.fields = append(main.fields, field{attemptField, b.key})
	b.recs = append(b.recs, &record{typ: "metadata", uri: uri, date: date, id: w.enc.newID(), contentType: warcFieldsType,
		fields: []field{{"WARC-Refers-To", main.id}}, parts: [][]byte{w.metadataBlock(req, res)}})
	return b
}

// onPage gives every record of b the WARC-Page-ID id: the page's
// rendering was archived with it (ArchiveRender).
func (b *built) onPage(id string) {
	for _, r := range b.recs {
		r.fields = append(r.fields, field{pageIDField, id})
	}
}

// warcFieldsType is the content type of warcinfo and metadata blocks.
const warcFieldsType = "application/warc-fields"

// response builds the response record of an HTTP answer (hdr: its status
// line and header), or its revisit record: server-not-modified for a 304,
// identical-payload-digest for a complete 2xx payload already archived.
// digest is the payload digest to remember when the record is a response
// worth referring to.
func (w *Writer) response(uri, date string, hdr []byte, res *httpfetch.Response) (rec *record, digest string) {
	ex := res.Exchange
	rec = &record{typ: "response", uri: uri, date: date, id: w.enc.newID(), contentType: httpResponseType,
		payloadDigest: w.enc.digest(ex.Body)}
	if ex.RemoteAddr != "" {
		if h, _, err := net.SplitHostPort(ex.RemoteAddr); err == nil && h != "" {
			rec.fields = append(rec.fields, field{"WARC-IP-Address", h})
		}
	}
	var revisit []field
	switch {
	case res.Status == http.StatusNotModified:
		revisit = []field{{"WARC-Profile", profileServerNotModified}, {"WARC-Refers-To-Target-URI", uri}}
	case res.Status >= 200 && res.Status < 300 && ex.BodyRead && len(ex.Body) > 0 && !res.Truncated:
		digest = rec.payloadDigest
		if revisit = w.identicalPayload(digest); revisit != nil {
			digest = ""
		}
	}
	if revisit == nil {
		if t := truncation(res); t != "" {
			rec.fields = append(rec.fields, field{"WARC-Truncated", t})
		}
		rec.parts = [][]byte{hdr, ex.Body}
		rec.coded = len(ex.Body) > len(hdr) && compressedCoding(ex.Header.Get("Content-Encoding"))
		return rec, digest
	}
	// The HTTP header only: the payload is the one the profile names
	// (WARC-Truncated: length, as gowarc writes revisits).
	rec.typ = "revisit"
	rec.fields = append(append(rec.fields, revisit...), field{"WARC-Truncated", "length"})
	rec.parts = [][]byte{hdr}
	return rec, ""
}

// identicalPayload returns the fields of a revisit of a payload already
// archived whose digest is digest (nil when none is remembered).
func (w *Writer) identicalPayload(digest string) []field {
	t, ok := w.digests.get(digest)
	if !ok {
		return nil
	}
	return identicalTo(t)
}

// identicalTo returns the fields of a revisit of the payload of t.
func identicalTo(t revisitTarget) []field {
	return []field{{"WARC-Profile", profileIdenticalPayload}, {"WARC-Refers-To", t.id},
		{"WARC-Refers-To-Target-URI", t.uri}, {"WARC-Refers-To-Date", t.date}}
}

// Revisit profiles (WARC 1.1).
const (
	profileServerNotModified = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
	profileIdenticalPayload  = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
)

// resource builds the resource record of an FTP retrieval.
func (w *Writer) resource(uri, date string, res *httpfetch.Response) *record {
	ct := res.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	rec := &record{typ: "resource", uri: uri, date: date, id: w.enc.newID(), contentType: ct,
		parts: [][]byte{res.Exchange.Body}, payloadDigest: w.enc.digest(res.Exchange.Body), blockIsPayload: true}
	if res.Truncated {
		rec.fields = append(rec.fields, field{"WARC-Truncated", "length"})
	}
	return rec
}

// compressedCoding reports whether a Content-Encoding value names a
// compression last (its payload does not compress again): "gzip",
// "identity, br"; not "", "identity" or a coding unknown.
func compressedCoding(ce string) bool {
	if i := strings.LastIndexByte(ce, ','); i >= 0 {
		ce = ce[i+1:]
	}
	switch strings.ToLower(strings.TrimSpace(ce)) {
	case "gzip", "x-gzip", "br", "zstd", "deflate", "compress", "x-compress":
		return true
	}
	return false
}

// truncation is the WARC-Truncated value of an answer whose archived body
// is not the whole body ("" when it is).
func truncation(res *httpfetch.Response) string {
	ex := res.Exchange
	switch {
	case res.Truncated:
		return "length" // cut at the size cap
	case ex.BodyRead:
		return ""
	case res.Kind == failure.TooSlow || res.Kind == failure.Timeout:
		return "time"
	case res.Status == http.StatusNoContent || res.Status == http.StatusNotModified || ex.Header.Get("Content-Length") == "0":
		return "" // no body to keep
	case res.Err != nil && res.Kind != failure.None && res.Kind != failure.Redirect && res.Kind != failure.BodyTooLarge:
		return "disconnect" // the body read failed
	default:
		return "unspecified" // not downloaded: a redirect, a type the parser does not read
	}
}

// requestBlock is the HTTP request as sent, in HTTP/1.1 form.
func requestBlock(ex *httpfetch.Exchange) []byte {
	b := make([]byte, 0, len(ex.Method)+len(ex.RequestURI)+len(ex.RequestHost)+headerSize(ex.RequestHeader)+32)
	b = append(append(b, ex.Method...), ' ')
	b = append(append(b, ex.RequestURI...), " HTTP/1.1\r\nHost: "...)
	b = append(append(b, ex.RequestHost...), "\r\n"...)
	b = appendHeader(b, ex.RequestHeader)
	return append(b, "\r\n"...)
}

// responseHeader is the header of the HTTP response as received: status
// line and headers; the block goes on with the body (content-coded as
// received). The transfer coding was removed by the client, so a chunked
// answer's Transfer-Encoding is kept as X-Crawler-Transfer-Encoding (as
// StormCrawler does) and its body is the de-chunked payload.
func responseHeader(ex *httpfetch.Exchange) []byte {
	b := make([]byte, 0, len(ex.Proto)+len(ex.Status)+headerSize(ex.Header)+48)
	b = append(append(b, ex.Proto...), ' ')
	b = append(append(b, ex.Status...), "\r\n"...)
	b = appendHeader(b, ex.Header)
	if ex.TransferCoded {
		b = append(b, "X-Crawler-Transfer-Encoding: chunked\r\n"...)
	}
	return append(b, "\r\n"...)
}

// headerSize is about the size of h written (appendHeader).
func headerSize(h http.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// headerNewlineToSpace is net/http's, for appendHeader.
var headerNewlineToSpace = strings.NewReplacer("\n", " ", "\r", " ")

// appendHeader appends h to b as http.Header.Write writes it: keys
// sorted, a key that is not a valid field name dropped, each value's
// line breaks made spaces and the white space around it trimmed; without
// its pooled sorter, replacer pass over every value and string writes
// (TestAppendHeader compares them).
func appendHeader(b []byte, h http.Header) []byte {
	var stack [24]string
	keys := stack[:0]
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range h[k] {
			if hasLineBreak(v) {
				v = headerNewlineToSpace.Replace(v)
			}
			v = textproto.TrimString(v)
			b = append(append(b, k...), ": "...)
			b = append(append(b, v...), "\r\n"...)
		}
	}
	return b
}

// metadataBlock is the fetch's metadata record (application/warc-fields):
// where the URL came from and how the fetch went. Outlinks are extracted
// later by the parser; they are in its documents, not here.
func (w *Writer) metadataBlock(req *crawlv1.FetchRequest, res *httpfetch.Response) []byte {
	b := make([]byte, 0, 200+len(req.GetCrawlId())+len(req.GetParentUrl())+len(w.opts.Instance)+len(res.ProxyID))
	b = appendWarcField(b, "crawl-id", req.GetCrawlId())
	b = appendWarcField(b, "via", req.GetParentUrl())
	b = appendWarcInt(b, "hopsFromSeed", int64(req.GetDepth()))
	b = appendWarcInt(b, "attempt", int64(req.GetAttempt()))
	b = appendWarcField(b, "fetcher", w.opts.Instance)
	b = appendWarcInt(b, "fetchTimeMs", res.Duration.Milliseconds())
	b = appendWarcInt(b, "ttfbMs", res.TTFB.Milliseconds())
	b = appendWarcInt(b, "wireBytes", res.WireBytes)
	b = appendWarcField(b, "outcome", outcomeOf(res))
	return appendWarcField(b, "proxy", res.ProxyID)
}

// appendWarcField appends the application/warc-fields line "k: v" to b,
// line breaks in v folded; nothing when v is empty.
func appendWarcField(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	return appendField(b, k, v)
}

func outcomeOf(res *httpfetch.Response) string {
	if res.Kind == failure.None {
		return "ok"
	}
	return string(res.Kind)
}

// appendWarcInt appends the application/warc-fields line "k: n" to b.
func appendWarcInt(b []byte, k string, n int64) []byte {
	b = append(append(b, k...), ": "...)
	return append(strconv.AppendInt(b, n, 10), "\r\n"...)
}
