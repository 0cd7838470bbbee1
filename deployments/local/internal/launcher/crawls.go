package launcher

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/services/seeder/crawlspec"
)

// The crawls a data dir ran: one JSON file each under <data-dir>/crawls,
// written when a crawl starts and again when it drains, so that the same
// command run again resumes a crawl that did not finish (interrupted,
// killed) instead of starting over, and a crawl that left URLs in the
// broker's topics is named when the next one starts.

// record is what a data dir remembers of one crawl.
type record struct {
	CrawlID string `json:"crawl_id"`
	// SeedsKey identifies the crawl's seeds (seedsKey): the same seeds
	// make the same key whatever their order or spelling.
	SeedsKey string    `json:"seeds_key,omitempty"`
	Seeds    int       `json:"seeds"`
	Started  time.Time `json:"started"`
	Runs     int       `json:"runs"`
	// Finished is when the crawl drained (zero while it has not);
	// Cancelled says it was cancelled instead (--cancel-others).
	Finished  time.Time `json:"finished,omitzero"`
	Cancelled bool      `json:"cancelled,omitempty"`
	// Previous is the finished crawl this one re-crawls incrementally
	// (the spec's previous_crawl_id): kept so that a resumed run seeds
	// from it again (repeats are duplicates to the scheduler).
	Previous string `json:"previous_crawl_id,omitempty"`
	// Deleted is when `crawl delete` deleted it (zero: it was not): it
	// is never resumed, and its id stays taken.
	Deleted time.Time `json:"deleted,omitzero"`
}

// done reports whether the crawl finished, was cancelled or deleted.
func (r record) done() bool { return !r.Finished.IsZero() || r.Cancelled || !r.Deleted.IsZero() }

// ErrDeleted is returned (wrapped) for a run of a deleted crawl's id.
var ErrDeleted = errors.New("was deleted")

// checkDeleted refuses a run of a crawl id the user chose (fixed) that
// names a deleted crawl: its id stays taken.
func checkDeleted(records []record, id string, fixed bool) error {
	for _, r := range records {
		if fixed && r.CrawlID == id && !r.Deleted.IsZero() {
			return fmt.Errorf("crawl %s %w at %s (crawl delete): choose another --crawl-id", id, ErrDeleted,
				r.Deleted.Local().Format(time.DateTime))
		}
	}
	return nil
}

// findRecord returns the data dir's record of crawl id, ok false when
// there is none.
func findRecord(records []record, id string) (record, bool) {
	for _, r := range records {
		if r.CrawlID == id {
			return r, true
		}
	}
	return record{}, false
}

func crawlsDir(dataDir string) string { return filepath.Join(dataDir, "crawls") }

// readRecords returns the data dir's crawls, the most recently started
// first. A file that does not decode is an error naming it.
func readRecords(dataDir string) ([]record, error) {
	entries, err := os.ReadDir(crawlsDir(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read crawls of %s: %w", dataDir, err)
	}
	var out []record
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		path := filepath.Join(crawlsDir(dataDir), e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read crawl record: %w", err)
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("read crawl record %s: not a crawl record, move it away: %w", path, err)
		}
		if r.CrawlID == "" {
			return nil, fmt.Errorf("read crawl record %s: no crawl_id, not a crawl record: move it away", path)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b record) int { return b.Started.Compare(a.Started) })
	return out, nil
}

// write saves r, atomically (a crawl killed while writing keeps its
// previous record).
func (r record) write(dataDir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode crawl record: %w", err)
	}
	if err := os.MkdirAll(crawlsDir(dataDir), 0o755); err != nil {
		return fmt.Errorf("create crawls dir: %w", err)
	}
	path := filepath.Join(crawlsDir(dataDir), r.CrawlID+".json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write crawl record: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write crawl record: %w", err)
	}
	return nil
}

// seedsKey identifies a set of seeds (canonical URLs): the hash of the
// sorted, distinct URLs, "" for none.
func seedsKey(seeds []string) string {
	if len(seeds) == 0 {
		return ""
	}
	s := slices.Clone(seeds)
	slices.Sort(s)
	s = slices.Compact(s)
	h := sha256.New()
	for _, u := range s {
		_, _ = io.WriteString(h, u+"\n") // a hash does not fail
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// plan is what a run does with the data dir's crawls: the crawl it runs
// (resumed or new) and the other crawls that did not finish, whose URLs
// may still be in the topics.
type plan struct {
	rec     record   // the crawl this run runs
	resumed bool     // rec is an unfinished crawl of the same seeds
	done    *record  // the latest finished crawl of the same seeds, when a new one starts
	full    bool     // done is not re-crawled incrementally (--full)
	others  []record // unfinished crawls besides rec, most recent first
}

// planRun decides which crawl a run runs. id is the request's crawl id and
// fixed says the user chose it (--crawl-id, the spec's crawl_id): then it
// is the crawl, resumed if the data dir knows it. Otherwise, unless fresh
// (--new), the latest unfinished crawl of the same seeds is resumed, and
// without one a new crawl of id starts: unless full (--full), a re-crawl
// of the latest finished crawl of the same seeds, when there is one, that
// asks its pages for again conditionally (record.Previous).
func planRun(records []record, id string, fixed, fresh, full bool, key string, seeds int, now time.Time) plan {
	var p plan
	for _, r := range records {
		switch {
		case fixed && r.CrawlID == id:
			p.rec, p.resumed = r, true
		case !fixed && !fresh && !p.resumed && key != "" && r.SeedsKey == key && !r.done():
			p.rec, p.resumed = r, true
		case !fixed && key != "" && r.SeedsKey == key && r.done() && r.Deleted.IsZero() && p.done == nil:
			p.done = &r
		}
	}
	if !p.resumed {
		p.rec = record{CrawlID: id, SeedsKey: key, Seeds: seeds, Started: now}
		if p.done != nil && !full {
			p.rec.Previous = p.done.CrawlID
		}
		p.full = full
	} else {
		p.done = nil
	}
	p.rec.Runs++
	for _, r := range records {
		if r.CrawlID != p.rec.CrawlID && !r.done() {
			p.others = append(p.others, r)
		}
	}
	return p
}

// checkTimeLimit refuses to resume a crawl whose time limit (the
// request's limits.max_duration, counted from the crawl's first start: the
// seeder counts from the creation of its spec, moments later) has passed:
// every service treats it as cancelled, so nothing would be crawled.
func (p plan) checkTimeLimit(req crawlspec.Request, now time.Time) error {
	limit, ok := timeLimit(req)
	if !p.resumed || p.rec.Runs < 2 || !ok || now.Before(p.rec.Started.Add(limit)) {
		return nil
	}
	return fmt.Errorf("crawl %s reached its time limit: %s after its start at %s (limits.max_duration, --max-duration); --new starts a new crawl",
		p.rec.CrawlID, limit, p.rec.Started.Local().Format(time.DateTime))
}

// timeLimit is req's limits.max_duration (validated), ok false when none.
func timeLimit(req crawlspec.Request) (time.Duration, bool) {
	if req.Limits == nil {
		return 0, false
	}
	d, err := time.ParseDuration(req.Limits.MaxDuration)
	return d, err == nil && d > 0
}

// describe says what the run does, for the start of its output.
func (p plan) describe(cancelOthers bool) string {
	var b strings.Builder
	switch {
	case p.resumed && p.rec.Runs > 1:
		fmt.Fprintf(&b, "resuming crawl %s (started %s, run %d): what it fetched is not fetched again (--new starts a new crawl)",
			p.rec.CrawlID, p.rec.Started.Local().Format(time.DateTime), p.rec.Runs)
	case p.done != nil && p.rec.Previous == p.done.CrawlID:
		fmt.Fprintf(&b, "new crawl %s re-crawls crawl %s of these seeds (finished at %s): its pages are asked for again "+
			"conditionally (If-None-Match, If-Modified-Since), the unchanged ones carried over (--full fetches every page again; --crawl-id %s adds to it)",
			p.rec.CrawlID, p.done.CrawlID, p.done.Finished.Local().Format(time.DateTime), p.done.CrawlID)
	case p.done != nil:
		fmt.Fprintf(&b, "new crawl %s: crawl %s of these seeds finished at %s (--crawl-id %s adds to it)",
			p.rec.CrawlID, p.done.CrawlID, p.done.Finished.Local().Format(time.DateTime), p.done.CrawlID)
		if p.full {
			b.WriteString(": every page is fetched again (--full)")
		}
	default:
		fmt.Fprintf(&b, "new crawl %s", p.rec.CrawlID)
	}
	for _, o := range p.others {
		if cancelOthers {
			fmt.Fprintf(&b, "\ncrawl %s (started %s) did not finish: cancelling it (--cancel-others)", o.CrawlID, o.Started.Local().Format(time.DateTime))
		} else {
			fmt.Fprintf(&b, "\ncrawl %s (started %s) did not finish: its URLs left in the topics are crawled too and counted below (--cancel-others cancels it)",
				o.CrawlID, o.Started.Local().Format(time.DateTime))
		}
	}
	return b.String()
}
