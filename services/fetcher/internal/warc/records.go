package warc

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nlnwa/gowarc/v3"

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
	return fmt.Sprintf("%s %d %d %d", req.GetCrawlId(), req.GetUrlFp(), req.GetAttempt(), sched)
}

// revisitTarget is an archived payload that later identical payloads
// refer to.
type revisitTarget struct {
	id, uri, date string
}

// built is the records of one fetch, in file order, and the index of the
// one that fetch_log points at (response, revisit or resource).
type built struct {
	recs []gowarc.WarcRecord
	main int
	// digest is the payload digest to remember for later revisits ("" to
	// remember none), target the main record.
	digest string
	kind   string // type of the main record, for the metrics
	// status and mime of the main record's CDXJ line (liveIndex).
	status, mime string
}

// close releases the records' buffers.
func (b *built) close() {
	for _, r := range b.recs {
		_ = r.Close()
	}
}

// build returns the records of the fetch of req answered by res.
func (w *Writer) build(req *crawlv1.FetchRequest, res *httpfetch.Response) (b built, err error) {
	ex := res.Exchange
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	uri := req.GetUrl()
	date := res.Start.UTC()
	if ex.FTP {
		rec, err := w.resource(uri, date, res)
		if err != nil {
			return b, err
		}
		b.recs, b.main, b.kind = []gowarc.WarcRecord{rec}, 0, "resource"
		b.mime = mediaType(rec.WarcHeader().Get(gowarc.ContentType))
	} else {
		reqRec, err := w.record(gowarc.Request, uri, date, httpRequestType, "", [][]byte{requestBlock(ex)})
		if err != nil {
			return b, fmt.Errorf("build request record: %w", err)
		}
		b.recs = append(b.recs, reqRec)
		rec, kind, digest, err := w.response(uri, date, res)
		if err != nil {
			return b, err
		}
		b.recs, b.main, b.kind, b.digest = append(b.recs, rec), 1, kind, digest
		b.status = statusOf(responseHeader(ex))
		b.mime = mediaType(ex.Header.Get("Content-Type"))
		if kind == "revisit" {
			b.mime = "warc/revisit"
		}
	}
	b.recs[b.main].WarcHeader().Set(attemptField, attemptKey(req))
	meta, err := w.record(gowarc.Metadata, uri, date, gowarc.ApplicationWarcFields, b.recs[b.main].RecordId(),
		[][]byte{w.metadataBlock(req, res)})
	if err != nil {
		return b, fmt.Errorf("build metadata record: %w", err)
	}
	b.recs = append(b.recs, meta)
	return b, nil
}

// record builds a record of type t whose block is the concatenation of
// parts (copied once, into the record's buffer).
func (w *Writer) record(t gowarc.RecordType, uri string, date time.Time, contentType, refersTo string, parts [][]byte, extra ...string) (gowarc.WarcRecord, error) {
	rb := gowarc.NewRecordBuilder(t, w.recOpts...)
	rb.AddWarcHeader(gowarc.WarcTargetURI, uri)
	rb.AddWarcHeaderTime(gowarc.WarcDate, date)
	rb.AddWarcHeader(gowarc.ContentType, contentType)
	if refersTo != "" {
		rb.AddWarcHeader(gowarc.WarcRefersTo, "<"+refersTo+">")
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] != "" {
			rb.AddWarcHeader(extra[i], extra[i+1])
		}
	}
	for _, p := range parts {
		if _, err := rb.Write(p); err != nil {
			_ = rb.Close()
			return nil, fmt.Errorf("buffer record block: %w", err)
		}
	}
	rec, _, err := rb.Build()
	if err != nil {
		return nil, fmt.Errorf("build %s record: %w", t, err)
	}
	return rec, nil
}

// response builds the response record of an HTTP answer, or its revisit
// record: server-not-modified for a 304, identical-payload-digest for a
// complete 2xx payload already archived. digest is the payload digest to
// remember when the record is a response worth referring to.
func (w *Writer) response(uri string, date time.Time, res *httpfetch.Response) (rec gowarc.WarcRecord, kind, digest string, err error) {
	ex := res.Exchange
	ip := ""
	if ex.RemoteAddr != "" {
		if h, _, err := net.SplitHostPort(ex.RemoteAddr); err == nil {
			ip = h
		}
	}
	rec, err = w.record(gowarc.Response, uri, date, httpResponseType, "", [][]byte{responseHeader(ex), ex.Body},
		gowarc.WarcIPAddress, ip, gowarc.WarcTruncated, truncation(res))
	if err != nil {
		return nil, "", "", fmt.Errorf("build response record: %w", err)
	}
	var ref *gowarc.RevisitRef
	switch {
	case res.Status == http.StatusNotModified:
		ref = &gowarc.RevisitRef{Profile: gowarc.ProfileServerNotModifiedV1_1, TargetUri: uri}
	case res.Status >= 200 && res.Status < 300 && ex.BodyRead && len(ex.Body) > 0 && !res.Truncated:
		digest = rec.WarcHeader().Get(gowarc.WarcPayloadDigest)
		if t, ok := w.digests.get(digest); ok {
			ref = &gowarc.RevisitRef{Profile: gowarc.ProfileIdenticalPayloadDigestV1_1,
				TargetRecordId: t.id, TargetUri: t.uri, TargetDate: t.date}
			digest = ""
		}
	}
	if ref == nil {
		return rec, "response", digest, nil
	}
	rev, err := rec.ToRevisitRecord(ref)
	_ = rec.Close()
	if err != nil {
		return nil, "", "", fmt.Errorf("build revisit record: %w", err)
	}
	return rev, "revisit", "", nil
}

// resource builds the resource record of an FTP retrieval.
func (w *Writer) resource(uri string, date time.Time, res *httpfetch.Response) (gowarc.WarcRecord, error) {
	ct := res.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	trunc := ""
	if res.Truncated {
		trunc = "length"
	}
	rec, err := w.record(gowarc.Resource, uri, date, ct, "", [][]byte{res.Exchange.Body}, gowarc.WarcTruncated, trunc)
	if err != nil {
		return nil, fmt.Errorf("build resource record: %w", err)
	}
	return rec, nil
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
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", ex.Method, ex.RequestURI, ex.RequestHost)
	_ = ex.RequestHeader.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// responseHeader is the header of the HTTP response as received: status
// line and headers; the block goes on with the body (content-coded as
// received). The transfer coding was removed by the client, so a chunked
// answer's Transfer-Encoding is kept as X-Crawler-Transfer-Encoding (as
// StormCrawler does) and its body is the de-chunked payload.
func responseHeader(ex *httpfetch.Exchange) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s\r\n", ex.Proto, ex.Status)
	_ = ex.Header.Write(&b)
	if ex.TransferCoded {
		b.WriteString("X-Crawler-Transfer-Encoding: chunked\r\n")
	}
	b.WriteString("\r\n")
	return b.Bytes()
}

// metadataBlock is the fetch's metadata record (application/warc-fields):
// where the URL came from and how the fetch went. Outlinks are extracted
// later by the parser; they are in its documents, not here.
func (w *Writer) metadataBlock(req *crawlv1.FetchRequest, res *httpfetch.Response) []byte {
	var b bytes.Buffer
	field := func(k, v string) {
		if v != "" {
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(strings.NewReplacer("\r", " ", "\n", " ").Replace(v))
			b.WriteString("\r\n")
		}
	}
	field("crawl-id", req.GetCrawlId())
	field("via", req.GetParentUrl())
	field("hopsFromSeed", strconv.Itoa(int(req.GetDepth())))
	field("attempt", strconv.Itoa(int(req.GetAttempt())))
	field("fetcher", w.opts.Instance)
	field("fetchTimeMs", strconv.FormatInt(res.Duration.Milliseconds(), 10))
	field("ttfbMs", strconv.FormatInt(res.TTFB.Milliseconds(), 10))
	field("wireBytes", strconv.FormatInt(res.WireBytes, 10))
	field("outcome", outcomeOf(res))
	field("proxy", res.ProxyID)
	return b.Bytes()
}

func outcomeOf(res *httpfetch.Response) string {
	if res.Kind == failure.None {
		return "ok"
	}
	return string(res.Kind)
}
