package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/demosite"
)

const jobsToken = "e2e-jobs-token-0123456789"

// jobsAPI is a client of `seeder serve` for the tests.
type jobsAPI struct {
	t    *testing.T
	base string
}

func (a jobsAPI) do(ctx context.Context, method, path, body string, out any) int {
	a.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+jobsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	if resp.StatusCode/100 != 2 {
		a.t.Logf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

type crawlView struct {
	CrawlID string `json:"crawl_id"`
	State   string `json:"state"`
	Status  string `json:"status"`
	Counts  *struct {
		Admitted  uint64 `json:"admitted"`
		Terminal  uint64 `json:"terminal"`
		Pending   uint64 `json:"pending"`
		Retrying  uint64 `json:"retrying"`
		Finished  bool   `json:"finished"`
		Fetched   uint64 `json:"fetched"`
		Errors    uint64 `json:"errors"`
		Documents uint64 `json:"documents"`
		Queued    uint64 `json:"queued"`
		InFlight  int64  `json:"in_flight"`
	} `json:"counts"`
	CountsError string `json:"counts_error"`
}

// TestCrawlJobsAPI runs `seeder serve` next to the pipeline, submits the
// demo site's crawl through the API, follows its status until the API
// reports it drained, and checks the counts and the document export
// against what the crawl stored.
func TestCrawlJobsAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	e := startEnv(t, ctx, envConfig{site: demosite.Config{Hosts: 3, PagesPerHost: 20, FirstHostOctet: 150}, delay: e2eDelay})
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := e.p.StartService(ctx, "seeder", "seeder-api", []string{"serve", "--api-addr", addr, "--api-token", jobsToken}); err != nil {
		t.Fatalf("start seeder serve: %v", err)
	}
	api := jobsAPI{t: t, base: "http://" + addr}

	seeds, _ := json.Marshal(e.site.Seeds())
	body := `{"crawl_id":"` + e.crawlID + `","name":"e2e","seeds":` + string(seeds) + `,"limits":{"max_depth":50}}`
	if code := api.do(ctx, http.MethodPost, "/v1/crawls", body, nil); code != http.StatusCreated {
		t.Fatalf("submit: %d", code)
	}
	if code := api.do(ctx, http.MethodPost, "/v1/crawls", `{"seeds":["not a url"]}`, nil); code != http.StatusBadRequest {
		t.Errorf("bad submit: %d, want 400", code)
	}

	var v crawlView
	deadline := time.Now().Add(120 * time.Second)
	for v.Status != "drained" {
		if time.Now().After(deadline) {
			t.Fatalf("API never reported the crawl drained; last %+v %+v", v, v.Counts)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
		if code := api.do(ctx, http.MethodGet, "/v1/crawls/"+e.crawlID, "", &v); code != http.StatusOK {
			t.Fatalf("get: %d", code)
		}
	}
	s := e.drain(ctx, 30*time.Second) // the launcher's own drain detection agrees
	t.Logf("API: drained with %+v; launcher: %s", *v.Counts, s.Line())

	docs := e.documents(ctx)
	html := e.site.HTMLPages()
	if v.Counts.Documents != uint64(len(docs)) || len(docs) != len(html) || v.Counts.Queued != 0 || v.Counts.Fetched < uint64(len(html)) ||
		!v.Counts.Finished || v.Counts.Pending != 0 || v.Counts.Terminal != v.Counts.Admitted {
		t.Errorf("counts %+v; stored documents %d, HTML pages %d", *v.Counts, len(docs), len(html))
	}

	// The export is every stored document, one JSON object per line.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, api.base+"/v1/crawls/"+e.crawlID+"/documents", nil)
	req.Header.Set("Authorization", "Bearer "+jobsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var d struct {
			URL    string `json:"url"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		if _, ok := docs[d.URL]; !ok || exported[d.URL] {
			t.Errorf("exported %s: stored %v, repeated %v", d.URL, ok, exported[d.URL])
		}
		exported[d.URL] = true
	}
	resp.Body.Close()
	if len(exported) != len(docs) {
		t.Errorf("exported %d documents, stored %d", len(exported), len(docs))
	}

	// Cancel: a new revision; the crawl stays cancelled.
	if code := api.do(ctx, http.MethodPost, "/v1/crawls/"+e.crawlID+"/cancel", "", &v); code != 200 || v.State != "cancelled" {
		t.Errorf("cancel: %d %+v", code, v)
	}
	if code := api.do(ctx, http.MethodPost, "/v1/crawls/"+e.crawlID+"/resume", "", nil); code != http.StatusConflict {
		t.Errorf("resume after cancel: %d, want 409", code)
	}
	e.stop()
}
