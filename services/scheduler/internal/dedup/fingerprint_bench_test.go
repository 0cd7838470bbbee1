package dedup

import (
	"fmt"
	"testing"

	"github.com/trawl-crawler/trawl/libs/fingerprint"
)

// corpusSize is the URL count of seed 003's crawl, fingerprinted there in
// about 1 800 s of CPU; the target is under 2 s on one core.
const corpusSize = 23_700_000

// BenchmarkFingerprintURL fingerprints realistic ~60-byte canonical URLs
// with the crawl id, as the scheduler does for every discovered URL, and
// reports URLs/s, ns/URL and the extrapolated single-core time for the seed
// corpus (s/23.7M). Run with -cpu 1.
func BenchmarkFingerprintURL(b *testing.B) {
	urls := make([]string, 1<<12)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://www.example-host-%03d.com/section/%05d/page.html?id=%d", i%97, i, i*7)
	}
	var sum uint64
	for i := 0; b.Loop(); i++ {
		sum ^= fingerprint.URL("crawl-1", urls[i&(len(urls)-1)])
	}
	if sum == 0 {
		b.Log("xor of fingerprints is zero")
	}
	perURL := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(1/perURL, "URLs/s")
	b.ReportMetric(perURL*1e9, "ns/URL")
	b.ReportMetric(perURL*corpusSize, "s/23.7M")
	b.ReportMetric(float64(len(urls[len(urls)-1])), "bytes/url")
}

// BenchmarkFingerprintAndDedup is the scheduler's whole per-URL dedup step:
// fingerprint, then test-and-insert into a seen set that ends up holding
// every URL (23.7M-corpus extrapolation as above).
func BenchmarkFingerprintAndDedup(b *testing.B) {
	urls := make([]string, 1<<12)
	for i := range urls {
		urls[i] = fmt.Sprintf("https://www.example-host-%03d.com/section/%05d/page.html?id=", i%97, i)
	}
	s := New(0)
	for i := 0; b.Loop(); i++ {
		u := urls[i&(len(urls)-1)]
		fp := fingerprint.URL("crawl-1", u)
		s.Add(fp ^ uint64(i>>12)*0x9e3779b97f4a7c15) // distinct URLs beyond the table
	}
	perURL := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(1/perURL, "URLs/s")
	b.ReportMetric(perURL*corpusSize, "s/23.7M")
	b.ReportMetric(float64(s.Bytes())/float64(max(s.Len(), 1)), "bytes/URL")
}
