package warc

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
)

// benchWords is the vocabulary of the benchmark's pages: text that
// compresses about as much as an article's (gzip to a third or so), not a
// repeated line that compresses to nothing.
var benchWords = strings.Fields(`the of and to in is was for on that with as by at from his her
their an be this are which or had it not have were but one all new first after also who more
two other been can its into city time world year years state government company market report
people school music team season game party house water system national history island river
north south east west village population century public member development research series
album film station university college church village number area district record records group`)

// benchPage is an HTML page of 10-30 KB with 20-60 links, seeded by n:
// paragraphs of words drawn from benchWords, links to paths of the site
// and, some, of other sites.
func benchPage(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 39))
	size := 10<<10 + r.IntN(18<<10)
	links := 20 + r.IntN(41)
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Article %d</title>"+
		"<link rel=\"stylesheet\" href=\"/static/site.css\"></head>\n<body><nav><a href=\"/\">Home</a></nav>\n<main>\n", n)
	per := max(size/links, 200)
	for l := 0; l < links || b.Len() < size; l++ {
		b.WriteString("<p>")
		for start := b.Len(); b.Len()-start < per-80; {
			b.WriteString(benchWords[r.IntN(len(benchWords))])
			b.WriteByte(' ')
		}
		if l < links {
			if r.IntN(5) == 0 {
				fmt.Fprintf(&b, "<a href=\"https://site%d.example/%s/%d\">%s</a>", r.IntN(1000),
					benchWords[r.IntN(len(benchWords))], r.IntN(1e6), benchWords[r.IntN(len(benchWords))])
			} else {
				fmt.Fprintf(&b, "<a href=\"/%s/%d.html\">%s %s</a>", benchWords[r.IntN(len(benchWords))], r.IntN(1e6),
					benchWords[r.IntN(len(benchWords))], benchWords[r.IntN(len(benchWords))])
			}
		}
		b.WriteString(".</p>\n")
	}
	b.WriteString("</main></body></html>\n")
	return []byte(b.String())
}

// TestBenchPages checks what BenchmarkArchive archives: pages of 10-30 KB
// with 20-60 links.
func TestBenchPages(t *testing.T) {
	for n := range 64 {
		p := benchPage(n)
		links := strings.Count(string(p), "<a href=") // the nav link too
		if len(p) < 10<<10 || len(p) > 30<<10 || links < 21 || links > 61 {
			t.Errorf("page %d: %d bytes, %d links", n, len(p), links)
		}
	}
}

// cpuTime is the CPU time (user and system) the process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkArchive: the cost of archiving one fetch of an HTML page of
// 10-30 KB with 20-60 links (as the web's): request, response and
// metadata records built, digested, gzipped and written on the calling
// goroutine as the fetcher's workers do, and the files closed and indexed
// (Run's work, on its goroutine) before the timer stops. Reports the bytes
// on disk per fetch and per record and the CPU time of the whole process
// per fetch (all goroutines: gowarc's writer and Run too). Revisits are
// off (every payload would be one); files rotate at 64 MiB. The last
// sub-benchmark, huffman-only, is the identity-coded pages with
// Options.HuffmanOnly.
func BenchmarkArchive(b *testing.B) {
	const pages = 64
	bodies := make([][]byte, pages)
	for i := range bodies {
		bodies[i] = benchPage(i)
	}
	for _, c := range []struct{ coded, huffman bool }{{false, false}, {true, false}, {false, true}} {
		coded := c.coded
		name := fmt.Sprintf("gzip-coded=%v", coded)
		if c.huffman {
			name = "huffman-only"
		}
		b.Run(name, func(b *testing.B) {
			dir := b.TempDir()
			w, err := Open(Options{Dir: dir, Instance: "bench", MaxDigests: -1, MaxFileSize: 64 << 20, HuffmanOnly: c.huffman},
				nil, zap.NewNop(), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx, stop := context.WithCancel(b.Context())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			res := make([]*httpfetch.Response, pages)
			var n int64
			for i := range res {
				body := bodies[i]
				hdr := http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Date": {"Wed, 25 Nov 2026 10:00:00 GMT"},
					"Server": {"nginx"}, "Cache-Control": {"max-age=600"}, "Last-Modified": {"Tue, 24 Nov 2026 08:00:00 GMT"}}
				if coded {
					hdr.Set("Content-Encoding", "gzip")
					var z bytes.Buffer // as a server sends it: compressed, which DEFLATE cannot shrink again
					zw := gzip.NewWriter(&z)
					_, _ = zw.Write(body)
					_ = zw.Close()
					body = z.Bytes()
				}
				n += int64(len(body))
				res[i] = &httpfetch.Response{Status: 200, Start: time.Now(), Duration: 3 * time.Millisecond, Exchange: &httpfetch.Exchange{
					Method: "GET", RequestURI: fmt.Sprintf("/article/%d", i), RequestHost: "bench.test",
					RequestHeader: http.Header{"User-Agent": {"trawl/0.1"}, "Accept-Encoding": {httpfetch.AcceptEncoding}},
					RemoteAddr:    "127.0.0.1:80", Proto: "HTTP/1.1", Status: "200 OK", Header: hdr, Body: body, BodyRead: true,
				}}
			}
			b.SetBytes(n / pages)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := range b.N {
				if _, _, err := w.Archive(ctx, request("c1", fmt.Sprintf("http://bench.test/article/%d", i), 0, ""), res[i%pages]); err != nil {
					b.Fatal(err)
				}
			}
			stop()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			cpu = cpuTime() - cpu
			b.StopTimer()
			var size int64
			files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
			for _, f := range files {
				if st, err := os.Stat(f); err == nil {
					size += st.Size()
				}
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/1e6/float64(b.N), "cpu-ms/fetch")
			b.ReportMetric(float64(size)/float64(b.N), "disk-B/fetch")
			b.ReportMetric(float64(size)/float64(3*b.N+len(files)), "disk-B/record")
		})
	}
}
