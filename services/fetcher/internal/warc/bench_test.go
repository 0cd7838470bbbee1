package warc

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// BenchmarkArchive: the cost of archiving one fetch of a 20 KB HTML page
// (the generated web's pages are 10-30 KB): request, response and
// metadata records built, digested, gzipped and written, on the calling
// goroutine as the fetcher's workers do. Reports the bytes on disk per
// fetch. Revisits are off (every payload would be one).
func BenchmarkArchive(b *testing.B) {
	for _, coded := range []bool{false, true} {
		b.Run(fmt.Sprintf("gzip-coded=%v", coded), func(b *testing.B) {
			dir := b.TempDir()
			w, err := Open(Options{Dir: dir, Instance: "bench", MaxDigests: -1}, nil, zap.NewNop(), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx, stop := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			body := []byte("<html><body>" + strings.Repeat("<p>Some article text, words and <a href=\"/x\">links</a>.</p>\n", 300) + "</body></html>")
			hdr := http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Date": {"Wed, 25 Nov 2026 10:00:00 GMT"}}
			if coded {
				hdr.Set("Content-Encoding", "gzip")
				body = body[:len(body)/5] // about what gzip leaves of it
			}
			res := &httpfetch.Response{Status: 200, Start: time.Now(), Duration: 3 * time.Millisecond, Exchange: &httpfetch.Exchange{
				Method: "GET", RequestURI: "/article/1", RequestHost: "bench.test",
				RequestHeader: http.Header{"User-Agent": {"trawl/0.1"}, "Accept-Encoding": {httpfetch.AcceptEncoding}},
				RemoteAddr:    "127.0.0.1:80", Proto: "HTTP/1.1", Status: "200 OK", Header: hdr, Body: body, BodyRead: true,
			}}
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for i := range b.N {
				if _, _, err := w.Archive(ctx, request("c1", fmt.Sprintf("http://bench.test/article/%d", i), 0, ""), res); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stop()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			var size int64
			files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
			for _, f := range files {
				if st, err := os.Stat(f); err == nil {
					size += st.Size()
				}
			}
			b.ReportMetric(float64(size)/float64(b.N), "disk-B/fetch")
		})
	}
}
