// Package client is a Go client of the seeder's crawl-jobs API, used by
// trawlctl: submit, get, list, pause/resume/cancel, export, and the
// progress line of a watched crawl.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/services/seeder/internal/api"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
)

// Client talks to one API server. Safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// New returns a client of the API at base (http://host:port).
func New(base, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	Msg    string
	Fields []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	}
	retry bool // the answer had Retry-After
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "api status %d: %s", e.Status, e.Msg)
	for _, f := range e.Fields {
		fmt.Fprintf(&b, "\n  %s: %s", f.Field, f.Message)
	}
	return b.String()
}

// startRetries bounds the retries of a request answered 503 with
// Retry-After (a server still reading its control topic).
const startRetries = 30

// do sends a request; a 2xx body is returned open for the caller to close.
// A 503 with Retry-After (the server is starting) is retried after a
// second, at most startRetries times: nothing was done by the server.
func (c *Client) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	for i := 0; ; i++ {
		resp, err := c.doOnce(ctx, method, path, body)
		var ae *APIError
		if i >= startRetries || !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !ae.retry {
			return resp, err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

func (c *Client) doOnce(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("call api: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		e := &APIError{Status: resp.StatusCode, retry: resp.Header.Get("Retry-After") != ""}
		var eb struct {
			Error string `json:"error"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		_ = json.Unmarshal(raw, &eb)
		_ = json.Unmarshal(raw, e)
		e.Msg = eb.Error
		if e.Msg == "" {
			e.Msg = strings.TrimSpace(string(raw))
		}
		return nil, e
	}
	return resp, nil
}

func (c *Client) doJSON(ctx context.Context, method, path string, body []byte, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode api answer: %w", err)
	}
	return nil
}

// Submit posts a crawl request (the JSON body of POST /v1/crawls).
func (c *Client) Submit(ctx context.Context, request []byte) (crawljobs.CreateResponse, error) {
	var out crawljobs.CreateResponse
	err := c.doJSON(ctx, http.MethodPost, "/v1/crawls", request, &out)
	return out, err
}

// Get returns a crawl with its status and counts.
func (c *Client) Get(ctx context.Context, id string) (crawljobs.CrawlView, error) {
	var out crawljobs.CrawlView
	err := c.doJSON(ctx, http.MethodGet, "/v1/crawls/"+url.PathEscape(id), nil, &out)
	return out, err
}

// List returns every crawl.
func (c *Client) List(ctx context.Context) ([]crawljobs.CrawlView, error) {
	var out api.ListResponse
	err := c.doJSON(ctx, http.MethodGet, "/v1/crawls", nil, &out)
	return out.Crawls, err
}

// Action pauses, resumes or cancels a crawl.
func (c *Client) Action(ctx context.Context, id, action string) (crawljobs.CrawlView, error) {
	switch action {
	case "pause", "resume", "cancel":
	default:
		return crawljobs.CrawlView{}, fmt.Errorf("unknown action %q", action)
	}
	var out crawljobs.CrawlView
	err := c.doJSON(ctx, http.MethodPost, "/v1/crawls/"+url.PathEscape(id)+"/"+action, nil, &out)
	return out, err
}

// Delete deletes a crawl (DELETE /v1/crawls/{id}): it is cancelled for
// good and ClickHouse starts removing its rows; the answer's Deletion says
// how many are left (Done: none).
func (c *Client) Delete(ctx context.Context, id string) (crawljobs.CrawlView, error) {
	var out crawljobs.CrawlView
	err := c.doJSON(ctx, http.MethodDelete, "/v1/crawls/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Export copies one table of a crawl in one format to w (GET
// /v1/crawls/{id}/export; an empty table or format takes the server's
// default, documents and jsonl) and returns the bytes copied. A transfer
// the server aborted midway is an error, not a short copy.
func (c *Client) Export(ctx context.Context, id, table, format string, w io.Writer) (int64, error) {
	q := url.Values{}
	if table != "" {
		q.Set("table", table)
	}
	if format != "" {
		q.Set("format", format)
	}
	path := "/v1/crawls/" + url.PathEscape(id) + "/export"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("copy export: %w", err)
	}
	return n, nil
}

// Finished reports whether a watched crawl is over.
func Finished(v crawljobs.CrawlView) bool { return v.Status == "drained" || v.Status == "cancelled" }

// Progress renders one progress line of width bar cells: a bar of
// terminal over admitted URLs and the counts.
func Progress(v crawljobs.CrawlView, width int) string {
	if width < 1 {
		width = 1
	}
	if v.Counts == nil {
		return fmt.Sprintf("%s [%s] %s (counts unavailable)", v.CrawlID, strings.Repeat(" ", width), v.Status)
	}
	c := *v.Counts
	done := c.Terminal
	frac := 0.0
	if c.Admitted > 0 {
		frac = float64(done) / float64(c.Admitted)
	}
	filled := int(frac*float64(width) + 0.5)
	return fmt.Sprintf("%s [%s%s] %3.0f%% %d/%d urls, %d fetched, %d errors, %d documents, %s",
		v.CrawlID, strings.Repeat("#", filled), strings.Repeat(".", width-filled), 100*frac,
		done, c.Admitted, c.Fetched, c.Errors, c.Documents, v.Status)
}
