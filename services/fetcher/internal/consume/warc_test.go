package consume

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/nlnwa/gowarc/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/outcome"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/politeness"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/warc"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestArchiveFetchLog: a fetcher with the WARC archive on (real broker and
// ClickHouse). Every fetch_log row of an answer carries the file and
// offset of its record, and the record there is its URL's; a fetch without
// an answer carries none; the analyst's join of fetch_log to warc_files
// finds every archived answer in a listed file.
func TestArchiveFetchLog(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	topics := kcfg.Topics()
	log := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
	mux := pageHandler("User-agent: *\nAllow: /\n")
	mux.HandleFunc("/etag", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotModified) })
	site := startSite(t, "127.0.0.71", mux)
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.72:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String() + "/gone"
	_ = ln.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	urls := []string{site.base + "/etag", dead}
	for i := range 6 {
		urls = append(urls, fmt.Sprintf("%s/p%d", site.base, i))
	}
	w := kafkaio.NewWriter(kcfg, log, prometheus.NewRegistry())
	defer w.Close()
	var msgs []kafka.Message
	for i, u := range urls {
		key, err := kafkaio.Key(u)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kafkaio.NewMessage(topics.Fetch, key, &crawlv1.FetchRequest{CrawlId: "cw", Url: u, UrlFp: uint64(i + 1), Etag: `"e"`})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	files := chstore.NewBatchWriter(store, chstore.WarcFiles, chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}, log, nil)
	archive, err := warc.Open(warc.Options{Dir: dir, Instance: "fw"}, files, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	archCtx, stopArchive := context.WithCancel(context.WithoutCancel(ctx))
	filesCtx, stopFiles := context.WithCancel(context.WithoutCancel(ctx))
	archDone, filesDone := make(chan error, 1), make(chan error, 1)
	go func() { archDone <- archive.Run(archCtx) }()
	go func() { filesDone <- files.Run(filesCtx) }()

	f := httpfetch.New(httpfetch.Options{AllowPrivate: true})
	defer f.Close()
	rc := robots.NewCache(f, time.Now, robots.Options{UserAgent: f.UserAgent()})
	_, stopFetcher := runFetcher(t, ctx, kcfg, store, Options{
		Topics: topics, Workers: 4, Outcome: outcome.Options{InstanceID: "fw", MaxAttempts: 1},
		Politeness: politeness.Options{Delay: 10 * time.Millisecond, MaxCrawlDelay: time.Second},
		Archive:    archive,
	}, f, rc, w, 20*time.Millisecond, 100, log)
	waitFor(ctx, t, "every request committed", func() bool {
		lag, err := kafkaio.Lag(ctx, kcfg, kcfg.GroupFor("fetcher"), topics.Fetch)
		return err == nil && lag == 0
	})
	if err := stopFetcher(); err != nil {
		t.Fatal(err)
	}
	// Shutdown order of the fetcher: the group, then the archive (files
	// closed and listed), then the warc_files writer.
	stopArchive()
	if err := <-archDone; err != nil {
		t.Fatal(err)
	}
	stopFiles()
	if err := <-filesDone; err != nil {
		t.Fatal(err)
	}

	rows, err := store.Conn().Query(ctx, "SELECT url, status, warc_file, warc_offset FROM fetch_log FINAL WHERE crawl_id = 'cw'")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var (
			u, file string
			status  uint16
			off     uint64
		)
		if err := rows.Scan(&u, &status, &file, &off); err != nil {
			t.Fatal(err)
		}
		n++
		if u == dead {
			if file != "" || status != 0 {
				t.Errorf("%s: status %d archived in %q", u, status, file)
			}
			continue
		}
		if file == "" {
			t.Errorf("%s: status %d, no warc file", u, status)
			continue
		}
		rd, err := gowarc.NewWarcFileReader(filepath.Join(dir, file), int64(off))
		if err != nil {
			t.Fatal(err)
		}
		rec, err := rd.Next()
		if err != nil {
			t.Fatalf("%s: record at %s@%d: %v", u, file, off, err)
		}
		wantType := gowarc.Response
		if status == http.StatusNotModified {
			wantType = gowarc.Revisit
		}
		if got := rec.WarcRecord.WarcHeader().Get(gowarc.WarcTargetURI); got != u || rec.WarcRecord.Type() != wantType {
			t.Errorf("%s: %s@%d holds a %s record of %s", u, file, off, rec.WarcRecord.Type(), got)
		}
		_ = rec.Close()
		_ = rd.Close()
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if n != len(urls) {
		t.Fatalf("%d fetch_log rows, want %d", n, len(urls))
	}
	// The analyst's query (README): from a fetch to the archived bytes.
	var joined uint64
	if err := store.Conn().QueryRow(ctx, `SELECT count() FROM (SELECT url, warc_file, warc_offset FROM fetch_log FINAL
  WHERE crawl_id = 'cw' AND warc_file != '') AS f
ANY INNER JOIN (SELECT file AS warc_file, dir FROM warc_files FINAL) AS w USING warc_file`).Scan(&joined); err != nil {
		t.Fatal(err)
	}
	if int(joined) != len(urls)-1 {
		t.Errorf("fetch_log joined to warc_files: %d rows, want %d", joined, len(urls)-1)
	}
}
