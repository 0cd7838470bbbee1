package consume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	"golang.org/x/text/encoding/simplifiedchinese"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// recycledPage is the body a recycle test host serves at path: 10–40 KB
// of text that no other page shares, so a body spliced from a recycled
// buffer that was still in use (another page's bytes, or a tail left from
// a longer page) cannot pass for the right one.
func recycledPage(host, path string) string {
	seed := sha256.Sum256([]byte(host + path))
	n := 10<<10 + int(seed[0])*120 // 10 KB .. 40 KB
	var b strings.Builder
	fmt.Fprintf(&b, "<html><body><h1>%s%s</h1>", host, path)
	for b.Len() < n {
		b.WriteString(hex.EncodeToString(seed[:]))
		b.WriteString("抓取网页")
		seed = sha256.Sum256(seed[:])
	}
	b.WriteString("</body></html>")
	return b.String()
}

// TestRecycledBuffersKeepPagesApart: the fetcher reads bodies into pooled
// buffers and encodes each page's record into another, both given back
// once the record is produced. Eight hosts fetched at once, bodies of
// every size with and without a Content-Length (the two read paths), a
// third of them in GBK (converted into a third buffer): every
// page on the fetched topic must carry exactly the text its URL served.
func TestRecycledBuffersKeepPagesApart(t *testing.T) {
	const hosts, pages = 8, 30
	kcfg := kafkatest.Config(t, 4)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	want := map[string]string{}
	var reqs []kafka.Message
	for h := range hosts {
		mux := http.NewServeMux()
		mux.HandleFunc("/robots.txt", http.NotFound)
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			body := recycledPage(r.Host, r.URL.Path)
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p"))
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			if n%3 == 0 {
				// GBK on the wire: the fetcher converts it into a buffer of its own
				gbk, err := simplifiedchinese.GBK.NewEncoder().String(body)
				if err != nil {
					t.Errorf("encode GBK: %v", err)
				}
				body = gbk
				w.Header().Set("Content-Type", "text/html; charset=gbk")
			}
			if n%2 == 0 {
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			} // odd pages: chunked, read without a length hint
			_, _ = w.Write([]byte(body))
		})
		s := startSite(t, fmt.Sprintf("127.0.0.%d", 21+h), mux)
		for p := range pages {
			u := fmt.Sprintf("%s/p%d", s.base, p)
			want[u] = recycledPage(strings.TrimPrefix(s.base, "http://"), fmt.Sprintf("/p%d", p))
			key, err := kafkaio.Key(u)
			if err != nil {
				t.Fatal(err)
			}
			m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{CrawlId: "c1", Url: u, UrlFp: uint64(len(reqs) + 1)})
			if err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, m)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	if err := w.Write(ctx, reqs...); err != nil {
		t.Fatalf("publish requests: %v", err)
	}
	f := httpfetch.New(httpfetch.Options{AllowPrivate: true})
	defer f.Close()
	rc := robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()})
	_, stopFetcher := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: hosts, Outcome: outcome.Options{InstanceID: "recycle-test"},
		Politeness: politeness.Options{Delay: time.Millisecond},
	}, f, rc, w, 50*time.Millisecond, 100, log)

	var (
		mu  sync.Mutex
		got = map[string]*crawlv1.FetchedPage{}
	)
	followCtx, stopFollow := context.WithCancel(ctx)
	var fg errgroup.Group
	follow(t, followCtx, &fg, kcfg, topics.Fetched, func(_ kafka.Message, p *crawlv1.FetchedPage) {
		if p.GetWillRetry() {
			return // a transient failure (a busy machine): its retry is the page's outcome
		}
		mu.Lock()
		got[p.GetUrl()] = p
		mu.Unlock()
	})
	waitFor(ctx, t, "every page published", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(want)
	})
	if err := stopFetcher(); err != nil {
		t.Fatalf("fetcher: %v", err)
	}
	stopFollow()
	if err := fg.Wait(); err != nil {
		t.Fatalf("follow: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for u, body := range want {
		p := got[u]
		if p.GetErrorKind() != "" {
			t.Errorf("%s: the fetch failed for good (%s: %s), the body cannot be checked", u, p.GetErrorKind(), p.GetErrorMessage())
			continue
		}
		if string(p.GetBody()) != body {
			t.Errorf("%s: published %d bytes that differ from the %d served (status %d, first bytes %.60q)", u, len(p.GetBody()), len(body), p.GetStatusCode(), p.GetBody())
		}
	}
}
