package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/seeder/crawlspec"
)

func TestSeedsKey(t *testing.T) {
	a := seedsKey([]string{"http://a.example/", "http://b.example/"})
	if a == "" || a != seedsKey([]string{"http://b.example/", "http://a.example/", "http://a.example/"}) {
		t.Errorf("the same seeds in another order, one repeated, make another key")
	}
	if a == seedsKey([]string{"http://a.example/"}) {
		t.Errorf("other seeds make the same key")
	}
	if seedsKey(nil) != "" {
		t.Errorf("no seeds make a key")
	}
}

// TestPlanRun: which crawl a run runs, given the data dir's crawls.
func TestPlanRun(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	key, other := seedsKey([]string{"http://a.example/"}), seedsKey([]string{"http://b.example/"})
	unfinished := record{CrawlID: "c-old", SeedsKey: key, Started: t0, Runs: 1}
	finished := record{CrawlID: "c-done", SeedsKey: key, Started: t0.Add(-time.Hour), Runs: 1, Finished: t0}
	stranger := record{CrawlID: "c-b", SeedsKey: other, Started: t0.Add(time.Minute), Runs: 2}
	cancelled := record{CrawlID: "c-x", SeedsKey: other, Started: t0, Runs: 1, Cancelled: true}
	tests := []struct {
		name         string
		records      []record
		id           string
		chosen, new  bool
		full         bool
		want         string
		resumed      bool
		runs         int
		done         string
		previous     string
		others       []string
		wantDescribe []string
	}{
		{name: "first run", id: "c-new", want: "c-new", runs: 1, wantDescribe: []string{"new crawl c-new"}},
		{name: "unfinished crawl of the same seeds resumed", records: []record{unfinished, finished}, id: "c-new",
			want: "c-old", resumed: true, runs: 2, wantDescribe: []string{"resuming crawl c-old", "run 2", "--new"}},
		{name: "--new starts over", records: []record{unfinished}, id: "c-new", new: true,
			want: "c-new", runs: 1, others: []string{"c-old"}, wantDescribe: []string{"new crawl c-new", "crawl c-old", "did not finish", "--cancel-others"}},
		{name: "finished crawl of the same seeds: a new one re-crawls it", records: []record{finished}, id: "c-new",
			want: "c-new", runs: 1, done: "c-done", previous: "c-done",
			wantDescribe: []string{"new crawl c-new re-crawls crawl c-done of these seeds", "conditionally", "--full", "--crawl-id c-done"}},
		{name: "--full: a new one fetching every page", records: []record{finished}, id: "c-new", full: true,
			want: "c-new", runs: 1, done: "c-done", wantDescribe: []string{"new crawl c-new", "crawl c-done of these seeds finished", "--crawl-id c-done", "every page is fetched again (--full)"}},
		{name: "a re-crawl resumed keeps its previous crawl", records: []record{{CrawlID: "c-re", SeedsKey: key, Started: t0, Runs: 1, Previous: "c-done"}, finished},
			id: "c-new", want: "c-re", resumed: true, runs: 2, previous: "c-done", wantDescribe: []string{"resuming crawl c-re"}},
		{name: "a chosen id is that crawl, resumed", records: []record{finished, stranger}, id: "c-done", chosen: true,
			want: "c-done", resumed: true, runs: 2, others: []string{"c-b"}},
		{name: "another unfinished crawl is named, a cancelled one is not", records: []record{stranger, cancelled}, id: "c-new",
			want: "c-new", runs: 1, others: []string{"c-b"}, wantDescribe: []string{"crawl c-b", "did not finish"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planRun(tt.records, tt.id, tt.chosen, tt.new, tt.full, key, 1, now)
			var others []string
			for _, o := range p.others {
				others = append(others, o.CrawlID)
			}
			var done string
			if p.done != nil {
				done = p.done.CrawlID
			}
			if p.rec.CrawlID != tt.want || p.resumed != tt.resumed || p.rec.Runs != tt.runs || done != tt.done ||
				strings.Join(others, ",") != strings.Join(tt.others, ",") {
				t.Errorf("plan: crawl %s resumed %v runs %d done %q others %v; want %s %v %d %q %v",
					p.rec.CrawlID, p.resumed, p.rec.Runs, done, others, tt.want, tt.resumed, tt.runs, tt.done, tt.others)
			}
			if p.rec.Previous != tt.previous {
				t.Errorf("previous crawl %q, want %q", p.rec.Previous, tt.previous)
			}
			if !tt.resumed && (!p.rec.Started.Equal(now) || p.rec.SeedsKey != key) {
				t.Errorf("a new crawl's record %+v: want started now with the seeds' key", p.rec)
			}
			d := p.describe(false)
			for _, w := range tt.wantDescribe {
				if !strings.Contains(d, w) {
					t.Errorf("describe = %q, want %q in it", d, w)
				}
			}
		})
	}
}

// TestRecords: records written are read back, most recent first; a file
// that is not a record is an error naming it.
func TestRecords(t *testing.T) {
	dir := t.TempDir()
	if recs, err := readRecords(dir); err != nil || len(recs) != 0 {
		t.Fatalf("empty data dir: %v, %v", recs, err)
	}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for i, id := range []string{"c1", "c2"} {
		r := record{CrawlID: id, SeedsKey: "k", Seeds: 2, Started: t0.Add(time.Duration(i) * time.Hour), Runs: 1}
		if id == "c1" {
			r.Finished = t0.Add(time.Minute)
		}
		if err := r.write(dir); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := readRecords(dir)
	if err != nil || len(recs) != 2 || recs[0].CrawlID != "c2" || !recs[1].done() || recs[0].done() {
		t.Fatalf("read back %+v, %v", recs, err)
	}
	bad := filepath.Join(crawlsDir(dir), "junk.json")
	if err := os.WriteFile(bad, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readRecords(dir); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("a broken record: %v, want an error naming %s", err, bad)
	}
}

// TestCheckTimeLimit: a resumed crawl whose time limit has passed since
// its first start is refused, naming the limit and --new; a new crawl, one
// within its limit or without one runs.
func TestCheckTimeLimit(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	resumed := plan{rec: record{CrawlID: "c", Started: t0, Runs: 2}, resumed: true}
	fresh := plan{rec: record{CrawlID: "c", Started: t0.Add(2 * time.Hour), Runs: 1}}
	limit := func(d string) crawlspec.Request { return crawlspec.Request{Limits: &crawlspec.Limits{MaxDuration: d}} }
	tests := []struct {
		name string
		p    plan
		req  crawlspec.Request
		want string // substring of the error; "" = none
	}{
		{"resumed past its limit", resumed, limit("1h"), "crawl c reached its time limit: 1h0m0s after its start"},
		{"resumed within its limit", resumed, limit("3h"), ""},
		{"resumed without a limit", resumed, crawlspec.Request{}, ""},
		{"zero limit", resumed, limit("0s"), ""},
		{"new crawl", fresh, limit("1h"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.checkTimeLimit(tt.req, t0.Add(2*time.Hour))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--new")):
				t.Fatalf("err = %v, want one with %q and --new", err, tt.want)
			}
		})
	}
}

// TestDeletedCrawl: a deleted crawl is never resumed, never named as the
// finished crawl of its seeds nor as another unfinished crawl, and its id
// chosen again is refused.
func TestDeletedCrawl(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	key := seedsKey([]string{"http://a.example/"})
	deleted := record{CrawlID: "c-del", SeedsKey: key, Started: t0, Runs: 1, Deleted: t0.Add(time.Minute)}
	records := []record{deleted}
	p := planRun(records, "c-new", false, false, false, key, 1, t0.Add(time.Hour))
	if p.resumed || p.rec.CrawlID != "c-new" || p.done != nil || len(p.others) != 0 {
		t.Errorf("plan with a deleted crawl of the same seeds: %+v; want a new crawl, nothing else named", p)
	}
	if err := checkDeleted(records, "c-del", true); err == nil || !strings.Contains(err.Error(), "c-del was deleted") {
		t.Errorf("the deleted id chosen again: %v", err)
	}
	if err := checkDeleted(records, "c-del", false); err != nil {
		t.Errorf("an id not chosen: %v", err)
	}
	if err := checkDeleted(records, "c-other", true); err != nil {
		t.Errorf("another id: %v", err)
	}
}

// TestLockDataDir: a data dir in use (a crawl runs) refuses a second
// lock until released.
func TestLockDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	unlock, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u2, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "in use by a crawl") {
		if u2 != nil {
			u2()
		}
		t.Fatalf("second lock: %v", err)
	}
	unlock()
	u3, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	u3()
}
