package crawljobs_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/services/seeder/internal/crawljobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// fakeControl is the control topic as one process sees it: the latest
// specification per crawl and the claimed ids. The real one
// (internal/control) is exercised by the api and console tests against a
// broker.
type fakeControl struct {
	mu         sync.Mutex
	specs      map[string]*crawlv1.CrawlSpec
	claimed    map[string]bool
	publishErr error
}

func newFakeControl() *fakeControl {
	return &fakeControl{specs: map[string]*crawlv1.CrawlSpec{}, claimed: map[string]bool{}}
}

func (c *fakeControl) Publish(_ context.Context, spec *crawlv1.CrawlSpec) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.publishErr != nil {
		return c.publishErr
	}
	c.specs[spec.GetCrawlId()] = spec
	return nil
}

func (c *fakeControl) Get(id string) *crawlv1.CrawlSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.specs[id]
}

func (c *fakeControl) All() []*crawlv1.CrawlSpec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Values(c.specs))
}

func (c *fakeControl) PublishSeeds(_ context.Context, _ string, seeds []jobs.Seed) (int, error) {
	return len(seeds), nil
}

func (c *fakeControl) InFlight(context.Context, []int) (int64, error) { return 0, nil }

func (c *fakeControl) CaughtUp() bool { return true }

func (c *fakeControl) Claim(_ context.Context, id string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claimed[id] {
		return false, nil
	}
	c.claimed[id] = true
	return true, nil
}

// fakeStats holds rows of every crawl in the tables of rows; Purge
// reports them and removes nothing (ClickHouse mutations are
// asynchronous).
type fakeStats struct {
	rows map[string]uint64
	err  error
}

func (s fakeStats) Counts(context.Context, string) (jobs.Counts, error) { return jobs.Counts{}, s.err }
func (s fakeStats) Partitions(context.Context, string) ([]int, error)   { return nil, s.err }
func (s fakeStats) CrawlRows(context.Context, string) (map[string]uint64, error) {
	return maps.Clone(s.rows), s.err
}
func (s fakeStats) Purge(ctx context.Context, id string) (map[string]uint64, error) {
	return s.CrawlRows(ctx, id)
}

func create(t *testing.T, s *crawljobs.Service, id string) {
	t.Helper()
	if _, err := s.Create(t.Context(), jobs.Request{CrawlID: id, Seeds: []string{"http://127.0.0.2/"}}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

// TestRefusals: every refusal and publishing failure of an operation is
// an *Error of the kind the faces turn into their answer, naming the
// field at fault where there is one.
func TestRefusals(t *testing.T) {
	valid := jobs.Request{CrawlID: "c1", Seeds: []string{"http://127.0.0.2/"}}
	tests := []struct {
		name      string
		op        func(t *testing.T, s *crawljobs.Service, c *fakeControl) error
		wantKind  crawljobs.Kind
		wantField string
	}{
		{"create an invalid request", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			_, err := s.Create(t.Context(), jobs.Request{CrawlID: "bad id!", Seeds: valid.Seeds})
			return err
		}, crawljobs.Invalid, "crawl_id"},
		{"create from sitemaps without a sitemap source", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			req := valid
			req.Sitemaps = true
			_, err := s.Create(t.Context(), req)
			return err
		}, crawljobs.Invalid, "sitemaps"},
		{"create a taken id", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			create(t, s, "c1")
			_, err := s.Create(t.Context(), valid)
			return err
		}, crawljobs.Conflict, "crawl_id"},
		{"create an id another submission claimed", func(t *testing.T, s *crawljobs.Service, c *fakeControl) error {
			c.claimed["c1"] = true
			_, err := s.Create(t.Context(), valid)
			return err
		}, crawljobs.Conflict, "crawl_id"},
		{"create a deleted crawl's id", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			create(t, s, "c1")
			if _, err := s.Delete(t.Context(), "c1"); err != nil {
				t.Fatal(err)
			}
			_, err := s.Create(t.Context(), valid)
			return err
		}, crawljobs.Conflict, "crawl_id"},
		{"create while the control topic fails", func(t *testing.T, s *crawljobs.Service, c *fakeControl) error {
			c.publishErr = errors.New("broker down")
			_, err := s.Create(t.Context(), valid)
			return err
		}, crawljobs.Unavailable, ""},
		{"pause an unknown crawl", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			_, err := s.SetState(t.Context(), "nope", crawlv1.CrawlState_CRAWL_STATE_PAUSED)
			return err
		}, crawljobs.NotFound, ""},
		{"resume a cancelled crawl", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			create(t, s, "c1")
			if _, err := s.SetState(t.Context(), "c1", crawlv1.CrawlState_CRAWL_STATE_CANCELLED); err != nil {
				t.Fatal(err)
			}
			_, err := s.SetState(t.Context(), "c1", crawlv1.CrawlState_CRAWL_STATE_RUNNING)
			return err
		}, crawljobs.Conflict, ""},
		{"pause a deleted crawl", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			create(t, s, "c1")
			if _, err := s.Delete(t.Context(), "c1"); err != nil {
				t.Fatal(err)
			}
			_, err := s.SetState(t.Context(), "c1", crawlv1.CrawlState_CRAWL_STATE_PAUSED)
			return err
		}, crawljobs.Gone, ""},
		{"pause while the control topic fails", func(t *testing.T, s *crawljobs.Service, c *fakeControl) error {
			create(t, s, "c1")
			c.publishErr = errors.New("broker down")
			_, err := s.SetState(t.Context(), "c1", crawlv1.CrawlState_CRAWL_STATE_PAUSED)
			return err
		}, crawljobs.Unavailable, ""},
		{"delete an impossible id", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			_, err := s.Delete(t.Context(), "a b")
			return err
		}, crawljobs.Invalid, "id"},
		{"delete an unknown crawl", func(t *testing.T, s *crawljobs.Service, _ *fakeControl) error {
			_, err := s.Delete(t.Context(), "nope")
			return err
		}, crawljobs.NotFound, ""},
		{"delete while the control topic fails", func(t *testing.T, s *crawljobs.Service, c *fakeControl) error {
			create(t, s, "c1")
			c.publishErr = errors.New("broker down")
			_, err := s.Delete(t.Context(), "c1")
			return err
		}, crawljobs.Unavailable, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeControl()
			s := crawljobs.New(c, fakeStats{}, nil, zap.NewNop())
			err := tt.op(t, s, c)
			var ae *crawljobs.Error
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want a *crawljobs.Error", err)
			}
			if ae.Kind != tt.wantKind || ae.Msg == "" {
				t.Errorf("err = %+v, want kind %d with a message", ae, tt.wantKind)
			}
			if tt.wantField != "" && (len(ae.Fields) == 0 || ae.Fields[0].Field != tt.wantField) {
				t.Errorf("fields = %v, want %s first", ae.Fields, tt.wantField)
			}
		})
	}
}

// TestDeletion: a deletion reports the rows ClickHouse still holds per
// table (tables without rows left out), done when none is left, and a
// ClickHouse failure as its error, not as the operation's; deleting again
// publishes nothing.
func TestDeletion(t *testing.T) {
	tests := []struct {
		name  string
		stats fakeStats
		want  crawljobs.Deletion
	}{
		{"rows left", fakeStats{rows: map[string]uint64{"fetch_log": 2, "documents": 0}},
			crawljobs.Deletion{RowsLeft: map[string]uint64{"fetch_log": 2}}},
		{"none left", fakeStats{rows: map[string]uint64{}}, crawljobs.Deletion{Done: true}},
		{"clickhouse down", fakeStats{err: errors.New("connection refused")},
			crawljobs.Deletion{Error: "clickhouse: connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newFakeControl()
			s := crawljobs.New(c, tt.stats, nil, zap.NewNop())
			create(t, s, "c1")
			for range 2 {
				v, err := s.Delete(t.Context(), "c1")
				if err != nil {
					t.Fatal(err)
				}
				if v.Status != jobs.StatusDeleted || v.DeletedAt == nil || v.Revision != 2 || v.Deletion == nil {
					t.Fatalf("deleted view = %+v, want deleted at revision 2 with its deletion", v)
				}
				if d := *v.Deletion; d.Done != tt.want.Done || d.Error != tt.want.Error || !maps.Equal(d.RowsLeft, tt.want.RowsLeft) {
					t.Errorf("deletion = %+v, want %+v", d, tt.want)
				}
			}
			if got := s.View(t.Context(), s.Crawl("c1")).Deletion; got == nil || got.Done != tt.want.Done || got.Error != tt.want.Error {
				t.Errorf("view's deletion = %+v, want %+v", got, tt.want)
			}
			if n := len(s.Crawls()); n != 0 {
				t.Errorf("%d crawls listed, want the deleted one left out", n)
			}
		})
	}
}
