package httpfetch

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

func compress(t *testing.T, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "raw-deflate":
		fw, err := flate.NewWriter(&buf, flate.BestCompression)
		if err != nil {
			t.Fatal(err)
		}
		w = fw
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		t.Fatalf("unknown coding %q", coding)
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFetchContentEncoding(t *testing.T) {
	const capBytes = 1 << 20
	page := []byte("<html><body>" + strings.Repeat("<p>héllo wörld</p>", 200) + "</body></html>")
	// 3 MiB of varied text: compresses a few times, not a hundred
	var words strings.Builder
	words.WriteString("<html><body>")
	for x := uint32(1); words.Len() < 3<<20; x = x*1664525 + 1013904223 {
		fmt.Fprintf(&words, "<p>w%x</p>", x>>8)
	}
	large := []byte(words.String())
	bomb := make([]byte, 64<<20) // 64 MiB of zeros

	type body struct {
		coding string // Content-Encoding header
		data   []byte // sent as is
	}
	bodies := map[string]body{}
	for _, c := range []string{"gzip", "deflate", "br", "zstd"} {
		bodies["/"+c] = body{c, compress(t, c, page)}
		bodies["/bomb-"+c] = body{c, compress(t, c, bomb)}
	}
	bodies["/raw-deflate"] = body{"deflate", compress(t, "raw-deflate", page)}
	bodies["/gzip-br"] = body{"gzip, br", compress(t, "br", compress(t, "gzip", page))}
	bodies["/large-gzip"] = body{"gzip", compress(t, "gzip", large)}
	bodies["/identity"] = body{"", page}
	bodies["/corrupt"] = body{"gzip", []byte("\x1f\x8bnot really gzip")}
	bodies["/unknown"] = body{"compress", page}

	var gotAE string
	base := serve(t, "127.0.0.30", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		gotAE = r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if b.coding != "" {
			w.Header().Set("Content-Encoding", b.coding)
		}
		_, _ = w.Write(b.data)
	}))
	f := New(Options{AllowPrivate: true, MaxBodyBytes: capBytes})
	defer f.Close()

	tests := []struct {
		path      string
		wantKind  failure.Kind
		wantBody  []byte // nil: no body expected
		truncated bool
	}{
		{"/identity", failure.None, page, false},
		{"/gzip", failure.None, page, false},
		{"/deflate", failure.None, page, false},
		{"/raw-deflate", failure.None, page, false},
		{"/br", failure.None, page, false},
		{"/zstd", failure.None, page, false},
		{"/gzip-br", failure.None, page, false},
		{"/large-gzip", failure.BodyTooLarge, large[:capBytes], true},
		{"/bomb-gzip", failure.DecompressionBomb, nil, true},
		{"/bomb-deflate", failure.DecompressionBomb, nil, true},
		{"/bomb-br", failure.DecompressionBomb, nil, true},
		{"/bomb-zstd", failure.DecompressionBomb, nil, true},
		{"/corrupt", failure.Other, nil, false},
		{"/unknown", failure.Unsupported, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := f.Fetch(t.Context(), Request{URL: base + tt.path})
			if res.Kind != tt.wantKind {
				t.Fatalf("kind = %q (%v), want %q", res.Kind, res.Err, tt.wantKind)
			}
			if !bytes.Equal(res.Body, tt.wantBody) {
				t.Errorf("body: %d bytes, want %d", len(res.Body), len(tt.wantBody))
			}
			if res.Truncated != tt.truncated {
				t.Errorf("truncated = %v, want %v", res.Truncated, tt.truncated)
			}
			if res.BodyBytes > capBytes {
				t.Errorf("body bytes %d over the cap %d", res.BodyBytes, capBytes)
			}
		})
	}
	if gotAE != AcceptEncoding {
		t.Errorf("Accept-Encoding sent = %q, want %q", gotAE, AcceptEncoding)
	}
}

// TestFetchTooSlow: a server trickling its body below the minimum rate is
// cut off long before the total timeout; one sending fast enough is not.
func TestFetchTooSlow(t *testing.T) {
	trickle := func(every time.Duration, chunk int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(200)
			for i := 0; i < 40; i++ {
				if _, err := w.Write(bytes.Repeat([]byte("a"), chunk)); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(every):
				}
			}
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/trickle", trickle(50*time.Millisecond, 1))  // 20 B/s
	mux.Handle("/steady", trickle(10*time.Millisecond, 100)) // 10 kB/s, 400 ms
	base := serve(t, "127.0.0.31", mux)
	f := New(Options{AllowPrivate: true, MinTransferRate: 1000, TransferRateWindow: 200 * time.Millisecond, FetchTimeout: 10 * time.Second})
	defer f.Close()

	res := f.Fetch(t.Context(), Request{URL: base + "/trickle"})
	if res.Kind != failure.TooSlow {
		t.Fatalf("trickle: kind = %q (%v), want too_slow", res.Kind, res.Err)
	}
	if res.Duration > 2*time.Second {
		t.Errorf("trickle cut after %v, want about one 200ms window", res.Duration)
	}
	res = f.Fetch(t.Context(), Request{URL: base + "/steady"})
	if res.Kind != failure.None || res.BodyBytes != 4000 {
		t.Fatalf("steady: kind = %q (%v), %d bytes, want a full 4000-byte body", res.Kind, res.Err, res.BodyBytes)
	}
}

// TestFetchNotModified: the validators go out and a 304 comes back as an
// answer without a body or error.
func TestFetchNotModified(t *testing.T) {
	base := serve(t, "127.0.0.32", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-None-Match") == `"v1"` || r.Header.Get("If-Modified-Since") == "Mon, 02 Jan 2006 15:04:05 GMT" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<p>new</p>"))
	}))
	f := New(Options{AllowPrivate: true})
	defer f.Close()
	tests := []struct {
		name       string
		req        Request
		wantStatus int
	}{
		{"etag matches", Request{ETag: `"v1"`}, 304},
		{"date matches", Request{LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"}, 304},
		{"changed", Request{ETag: `"v0"`}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.URL = base + "/p"
			res := f.Fetch(t.Context(), tt.req)
			if res.Status != tt.wantStatus || res.Kind != failure.None || res.Err != nil {
				t.Fatalf("status %d kind %q err %v, want %d without error", res.Status, res.Kind, res.Err, tt.wantStatus)
			}
			if tt.wantStatus == 304 && len(res.Body) != 0 {
				t.Errorf("304 with a %d-byte body", len(res.Body))
			}
		})
	}
}
