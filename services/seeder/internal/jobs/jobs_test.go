package jobs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

var now = time.Date(2026, 11, 22, 4, 0, 0, 0, time.UTC)

func TestBuildKeywordSeeds(t *testing.T) {
	job, err := jobs.Build(jobs.Request{
		CrawlID: "kw",
		Seeds:   []string{"http://127.0.0.2/"},
		Keywords: &jobs.Keywords{Groups: [][]string{{"red", "blue"}, {"car"}}, Combine: "product",
			Engines: []string{"google"}, Pages: 2},
	}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobs.Seed{
		{URL: "http://127.0.0.2/"},
		{URL: "https://www.google.com/search?q=red+car&start=0", Engine: "google"},
		{URL: "https://www.google.com/search?q=red+car&start=10", Engine: "google"},
		{URL: "https://www.google.com/search?q=blue+car&start=0", Engine: "google"},
		{URL: "https://www.google.com/search?q=blue+car&start=10", Engine: "google"},
	}
	if len(job.Seeds) != len(want) {
		t.Fatalf("seeds %+v, want %+v", job.Seeds, want)
	}
	for i := range want {
		if job.Seeds[i] != want[i] {
			t.Errorf("seed %d = %+v, want %+v", i, job.Seeds[i], want[i])
		}
	}
	if s := job.Spec; s.GetRevision() != 1 || s.GetState() != crawlv1.CrawlState_CRAWL_STATE_RUNNING || !s.GetCreatedAt().AsTime().Equal(now) {
		t.Errorf("spec %v", s)
	}
}

func TestTransition(t *testing.T) {
	const (
		running   = crawlv1.CrawlState_CRAWL_STATE_RUNNING
		paused    = crawlv1.CrawlState_CRAWL_STATE_PAUSED
		cancelled = crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	)
	tests := []struct {
		name     string
		from, to crawlv1.CrawlState
		wantErr  error
	}{
		{"pause", running, paused, nil},
		{"resume", paused, running, nil},
		{"cancel paused", paused, cancelled, nil},
		{"resume cancelled", cancelled, running, jobs.ErrFinal},
		{"pause cancelled", cancelled, paused, jobs.ErrFinal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &crawlv1.CrawlSpec{CrawlId: "c", State: tt.from, Revision: 7, Name: "n"}
			next, err := jobs.Transition(spec, tt.to, now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if next.GetRevision() != 8 || next.GetState() != tt.to || next.GetName() != "n" || spec.GetRevision() != 7 {
				t.Errorf("next %v (old %v)", next, spec)
			}
		})
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		state  crawlv1.CrawlState
		counts jobs.Counts
		have   bool
		want   string
	}{
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, Queued: 1}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3}, true, "drained"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, InFlight: 2}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3, InFlight: -1}, true, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_RUNNING, jobs.Counts{Admitted: 3}, false, "running"},
		{crawlv1.CrawlState_CRAWL_STATE_PAUSED, jobs.Counts{Admitted: 3}, true, "paused"},
		{crawlv1.CrawlState_CRAWL_STATE_CANCELLED, jobs.Counts{Admitted: 3, Queued: 2}, true, "cancelled"},
	}
	for _, tt := range tests {
		if got := jobs.Status(tt.state, tt.counts, tt.have); got != tt.want {
			t.Errorf("Status(%v, %+v, %v) = %s, want %s", tt.state, tt.counts, tt.have, got, tt.want)
		}
	}
}

func FuzzBuildSeedsText(f *testing.F) {
	f.Add("http://127.0.0.2/\nnope\n")
	f.Fuzz(func(t *testing.T, text string) {
		job, err := jobs.Build(jobs.Request{CrawlID: "f", SeedsText: text, SkipBad: true}, nil, now)
		var fe jobs.FieldErrors
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("error %v is not FieldErrors", err)
		}
		for _, s := range job.Seeds {
			if s.URL == "" {
				t.Error("empty seed")
			}
		}
	})
}
