package httpfetch

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptrace"
)

// Exchange is what a fetch sent and received, kept for the WARC archive
// when Request.Capture is set: the request headers as sent and the response
// as received, before content decoding and charset conversion.
//
// The body is the payload with the transfer coding removed (net/http
// de-chunks it; over HTTP/2 there is no chunking to keep): Content-Encoding
// is kept as received. Body aliases the decoded body when the response had
// no content coding (no second copy of it); it must not be modified.
type Exchange struct {
	Method        string
	RequestURI    string      // path and query as sent
	RequestHost   string      // Host header as sent
	RequestHeader http.Header // as sent; credentials (Authorization) withheld
	RemoteAddr    string      // ip:port of the connection that answered; "" when unknown

	Proto         string      // "HTTP/1.1", "HTTP/2.0"
	Status        string      // status line after the protocol: "200 OK"
	Header        http.Header // response headers as received
	TransferCoded bool        // the answer was chunked (the chunking is not in Body)
	Body          []byte      // as received (content-coded), cut at the size cap
	// BodyRead is false when the body was not downloaded (a redirect, a
	// binary type the parser does not read): Body is empty and the
	// archived answer is marked truncated.
	BodyRead bool

	// FTP: the fetch was an FTP retrieval; Body holds the file as
	// received (or the listing as rendered).
	FTP bool
}

// captureConn records the remote address of the connection a request
// used, for WARC-IP-Address.
func captureConn(req *http.Request, ex *Exchange) *http.Request {
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Conn != nil {
			ex.RemoteAddr = info.Conn.RemoteAddr().String()
		}
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// requestExchange starts the Exchange of req, after it was sent.
func requestExchange(req *http.Request, ex *Exchange) {
	ex.Method = req.Method
	ex.RequestURI = req.URL.RequestURI()
	ex.RequestHost = req.Host
	if ex.RequestHost == "" {
		ex.RequestHost = req.URL.Host
	}
	h := req.Header.Clone()
	if h.Get("Authorization") != "" {
		h.Set("Authorization", "[withheld]")
	}
	ex.RequestHeader = h
}

// responseExchange records the status line and headers of hr.
func responseExchange(hr *http.Response, ex *Exchange) {
	ex.Proto = hr.Proto
	ex.Status = hr.Status
	ex.Header = hr.Header
	ex.TransferCoded = len(hr.TransferEncoding) > 0
}

// teeWire copies the bytes read from r (the body as received) into buf.
type teeWire struct {
	r   io.Reader
	buf *bytes.Buffer
}

func (t teeWire) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.buf.Write(p[:n])
	return n, err
}
