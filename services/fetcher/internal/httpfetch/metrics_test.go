package httpfetch

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/trawl-crawler/trawl/testkit/metricstest"
)

func TestStatusClass(t *testing.T) {
	for code, want := range map[int]string{0: "none", 99: "none", 100: "1xx", 200: "2xx", 304: "3xx", 404: "4xx", 599: "5xx", 600: "none"} {
		if got := StatusClass(code); got != want {
			t.Errorf("StatusClass(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestMetrics: every request is timed by its status class and its body
// bytes counted; two fetchers of one registry share the metrics; a
// request without an answer is timed as "none".
func TestMetrics(t *testing.T) {
	body := []byte("<html>twenty bytes..</html>")
	base := serve(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	reg := prometheus.NewPedanticRegistry()
	f, g := New(Options{AllowPrivate: true, Metrics: reg}), New(Options{AllowPrivate: true, Metrics: reg})
	defer f.Close()
	defer g.Close()
	f.Fetch(t.Context(), Request{URL: base + "/a"})
	g.Fetch(t.Context(), Request{URL: base + "/b"})
	f.Fetch(t.Context(), Request{URL: base + "/missing"})
	f.Fetch(t.Context(), Request{URL: "http://127.0.0.2:1/"}) // refused: no answer
	if n := metricstest.Value(t, reg, "bytes_fetched_total", "", ""); n < float64(2*len(body)) {
		t.Errorf("bytes_fetched_total = %v, want at least the two pages' %d", n, 2*len(body))
	}
	samples := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "fetch_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			samples[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	for class, want := range map[string]uint64{"2xx": 2, "4xx": 1, "none": 1, "5xx": 0} {
		if samples[class] != want {
			t.Errorf("fetch_duration_seconds{status_class=%q} has %d samples, want %d", class, samples[class], want)
		}
	}
	if len(samples) != 6 {
		t.Errorf("fetch_duration_seconds has %d series, want one per status class from the start (6)", len(samples))
	}
}
