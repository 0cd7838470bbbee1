// Package crawljobs is the seeder's crawl-job operations: create a crawl
// (validate the request, read the sitemaps it asks for, claim its id,
// publish its specification and seeds), pause, resume or cancel it,
// delete it and sweep the rows deleted crawls leave behind, list crawls
// and view one with its live counts. The HTTP API (internal/api) and the
// operator console (internal/console) are two faces over them: a refusal
// is an *Error whose Kind each face turns into its own answer.
package crawljobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/services/seeder/internal/sitemaps"
)

// Control publishes and knows crawl specifications (the control topic).
type Control interface {
	// Publish writes spec durably; Get sees it when Publish returns.
	Publish(ctx context.Context, spec *crawlv1.CrawlSpec) error
	// Get returns the latest specification of a crawl, or nil.
	Get(crawlID string) *crawlv1.CrawlSpec
	// All returns every known specification.
	All() []*crawlv1.CrawlSpec
	// PublishSeeds publishes seeds of a crawl, returning how many were acknowledged.
	PublishSeeds(ctx context.Context, crawlID string, seeds []jobs.Seed) (int, error)
	// InFlight returns the records the pipeline has not finished; nil
	// partitions means every partition, otherwise the host-keyed topics
	// count only those (a crawl's partitions).
	InFlight(ctx context.Context, partitions []int) (int64, error)
	// CaughtUp reports whether every specification published before the
	// server started is known; until then the API answers 503.
	CaughtUp() bool
	// Claim claims a new crawl id on the control topic and reports
	// whether this submission owns it (false: another submission, on
	// this server or another, claimed it first). It blocks until the
	// claim is decided.
	Claim(ctx context.Context, crawlID string) (bool, error)
}

// Stats reads a crawl's progress and removes its rows (ClickHouse).
type Stats interface {
	Counts(ctx context.Context, crawlID string) (jobs.Counts, error)
	// Partitions returns the URL-topic partitions of the crawl's admitted URLs.
	Partitions(ctx context.Context, crawlID string) ([]int, error)
	// CrawlRows returns, per table still holding rows of the crawl, how
	// many (none: an empty map).
	CrawlRows(ctx context.Context, crawlID string) (map[string]uint64, error)
	// Purge starts the removal of the crawl's rows from every table that
	// still holds some (asynchronous: ClickHouse mutations) and returns
	// the rows each held, as CrawlRows.
	Purge(ctx context.Context, crawlID string) (map[string]uint64, error)
}

// SitemapSource reads sitemaps (sitemaps.Discoverer).
type SitemapSource interface {
	Discover(ctx context.Context, seedURLs, sitemapURLs []string) sitemaps.Result
}

// Service runs the crawl-job operations. Safe for concurrent use.
type Service struct {
	control  Control
	stats    Stats
	sitemaps SitemapSource
	log      *zap.Logger
	now      func() time.Time
	newID    func() string
	// mu serializes spec changes so that revisions increase one by one.
	mu sync.Mutex
}

// New returns the operations over the control topic and ClickHouse;
// sitemaps reads the sitemaps a request asks for (nil rejects such
// requests).
func New(control Control, stats Stats, sitemaps SitemapSource, log *zap.Logger) *Service {
	return &Service{control: control, stats: stats, sitemaps: sitemaps, log: log, now: time.Now, newID: randomID}
}

func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "crawl-" + hex.EncodeToString(b[:])
}

// Kind is the class of a refused or failed operation.
type Kind int

const (
	// Invalid is an invalid request or crawl id.
	Invalid Kind = iota + 1
	// NotFound is a crawl id no crawl has.
	NotFound
	// Conflict is a crawl id that is taken, or a change the crawl's
	// state does not allow (a cancelled crawl).
	Conflict
	// Gone is a deleted crawl.
	Gone
	// Unavailable is a control topic that could not be written; trying
	// again may succeed.
	Unavailable
)

// Error is a refused or failed operation: its kind, its message, and the
// problems of each field of the request.
type Error struct {
	Kind   Kind
	Msg    string
	Fields jobs.FieldErrors
	// SitemapProblems are what the sitemaps of a refused request held.
	SitemapProblems []sitemaps.Problem
}

func (e *Error) Error() string {
	if len(e.Fields) > 0 {
		return e.Msg + ": " + e.Fields.Error()
	}
	return e.Msg
}

// CrawlView is a crawl as the API shows it.
type CrawlView struct {
	CrawlID     string          `json:"crawl_id"`
	Name        string          `json:"name,omitempty"`
	State       string          `json:"state"`                  // running, paused, cancelled
	Status      string          `json:"status"`                 // state, drained, or deleted (jobs.StatusDeleted)
	StateReason string          `json:"state_reason,omitempty"` // ReasonTimeLimit when its time limit cancelled it
	Revision    uint64          `json:"revision"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Spec        json.RawMessage `json:"spec,omitempty"`
	Counts      *jobs.Counts    `json:"counts,omitempty"`
	CountsError string          `json:"counts_error,omitempty"`
	// DeletedAt is when the crawl was deleted (nil: it was not); Deletion
	// how far its rows are removed, where the answer says.
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	Deletion  *Deletion  `json:"deletion,omitempty"`
}

// CreateResponse is a created crawl (the answer of POST /v1/crawls).
type CreateResponse struct {
	CrawlView
	SeedsPublished int              `json:"seeds_published"`
	InvalidSeeds   jobs.FieldErrors `json:"invalid_seeds,omitempty"`
	// SitemapURLs is how many of the published seeds came from sitemaps;
	// SitemapProblems what could not be used (failed sitemaps, invalid
	// entries).
	SitemapURLs     int                `json:"sitemap_urls,omitempty"`
	SitemapProblems []sitemaps.Problem `json:"sitemap_problems,omitempty"`
}

func stateName(s crawlv1.CrawlState) string {
	switch s {
	case crawlv1.CrawlState_CRAWL_STATE_PAUSED:
		return "paused"
	case crawlv1.CrawlState_CRAWL_STATE_CANCELLED:
		return "cancelled"
	}
	return "running"
}

var specJSON = protojson.MarshalOptions{UseProtoNames: true}

// ReasonTimeLimit is the state_reason of a crawl its time limit
// (limits.max_duration) cancelled.
const ReasonTimeLimit = "time limit"

// StateReason is why spec (as control.Get returns it) is in its state
// when an operator did not put it there: ReasonTimeLimit, or "".
func StateReason(spec *crawlv1.CrawlSpec) string {
	if crawlcontrol.EndedByTimeLimit(spec) {
		return ReasonTimeLimit
	}
	return ""
}

// Summary is a crawl as GET /v1/crawls lists it: without its
// specification and counts.
func Summary(spec *crawlv1.CrawlSpec) CrawlView { return view(spec, false) }

func view(spec *crawlv1.CrawlSpec, withSpec bool) CrawlView {
	v := CrawlView{
		CrawlID: spec.GetCrawlId(), Name: spec.GetName(),
		State: stateName(spec.GetState()), Status: stateName(spec.GetState()), StateReason: StateReason(spec),
		Revision:  spec.GetRevision(),
		CreatedAt: spec.GetCreatedAt().AsTime().UTC(), UpdatedAt: spec.GetUpdatedAt().AsTime().UTC(),
	}
	if withSpec {
		if b, err := specJSON.Marshal(spec); err == nil {
			v.Spec = b
		}
	}
	if crawlcontrol.Deleted(spec) {
		at := spec.GetDeletedAt().AsTime().UTC()
		v.DeletedAt, v.Status = &at, jobs.StatusDeleted
	}
	return v
}

// withCounts adds the live counts and status.
func (s *Service) withCounts(ctx context.Context, v *CrawlView, spec *crawlv1.CrawlSpec) {
	c, err := s.stats.Counts(ctx, spec.GetCrawlId())
	if err != nil {
		s.log.Warn("crawl counts unavailable", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		v.CountsError = "counts unavailable: " + err.Error()
		return
	}
	parts, err := s.stats.Partitions(ctx, spec.GetCrawlId())
	if err != nil {
		s.log.Warn("crawl partitions unavailable", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		parts = nil // measure every partition
	}
	if c.InFlight, err = s.control.InFlight(ctx, parts); err != nil {
		s.log.Warn("pipeline lag unavailable", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		c.InFlight = -1
	}
	v.Counts = &c
	v.Status = jobs.Status(spec.GetState(), c, true)
}

// Crawls returns the specification of every crawl but the deleted ones,
// newest first.
func (s *Service) Crawls() []*crawlv1.CrawlSpec {
	all := slices.DeleteFunc(s.control.All(), crawlcontrol.Deleted)
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i].GetCreatedAt().AsTime(), all[j].GetCreatedAt().AsTime()
		if !a.Equal(b) {
			return a.After(b)
		}
		return all[i].GetCrawlId() < all[j].GetCrawlId()
	})
	return all
}

// CaughtUp reports whether the control topic is read to its end (before,
// the API and the console answer 503).
func (s *Service) CaughtUp() bool { return s.control.CaughtUp() }

// Crawl returns the latest specification of a crawl, or nil; a deleted
// crawl's too (crawlcontrol.Deleted).
func (s *Service) Crawl(id string) *crawlv1.CrawlSpec { return s.control.Get(id) }

// View returns a crawl as GET /v1/crawls/{id} shows it: its specification,
// its live counts and its status; a deleted crawl's with its Deletion
// instead of counts.
func (s *Service) View(ctx context.Context, spec *crawlv1.CrawlSpec) CrawlView {
	v := view(spec, true)
	if crawlcontrol.Deleted(spec) {
		left, err := s.stats.CrawlRows(ctx, spec.GetCrawlId())
		if err != nil {
			s.log.Warn("rows of a deleted crawl not counted", telemetry.Crawl(spec.GetCrawlId()), zap.Error(err))
		}
		v.Deletion = deletion(left, err)
		return v
	}
	s.withCounts(ctx, &v, spec)
	return v
}

// Create validates req (jobs.Build: every problem, field by field), reads
// the sitemaps it asks for, and publishes the crawl's specification and
// seeds: what POST /v1/crawls and the console's form do. A refusal or a
// publishing failure is an *Error; ctx's end before anything was
// published is ctx's error.
func (s *Service) Create(ctx context.Context, req jobs.Request) (CreateResponse, error) {
	job, err := jobs.Build(req, s.newID, s.now())
	var fe jobs.FieldErrors
	switch {
	case errors.As(err, &fe):
		return CreateResponse{}, &Error{Kind: Invalid, Msg: "invalid request", Fields: fe}
	case err != nil:
		return CreateResponse{}, &Error{Kind: Invalid, Msg: err.Error()}
	}
	id := job.Spec.GetCrawlId()
	if err := s.exists(id); err != nil {
		return CreateResponse{}, err
	}
	var (
		fromSitemaps int
		problems     []sitemaps.Problem
	)
	if job.Sitemaps || len(job.SitemapURLs) > 0 {
		if s.sitemaps == nil {
			return CreateResponse{}, &Error{Kind: Invalid, Msg: "invalid request",
				Fields: jobs.FieldErrors{{Field: "sitemaps", Message: "sitemap seeding is not enabled on this server"}}}
		}
		// Read before taking the lock: it may take a while.
		var hosts []string
		if job.Sitemaps {
			for _, sd := range job.Seeds {
				if sd.Engine == "" {
					hosts = append(hosts, sd.URL)
				}
			}
		}
		res := s.sitemaps.Discover(ctx, hosts, job.SitemapURLs)
		if err := ctx.Err(); err != nil {
			return CreateResponse{}, fmt.Errorf("read sitemaps: %w", err)
		}
		entries := make([]jobs.Seed, len(res.Entries))
		for i, e := range res.Entries {
			entries[i] = jobs.Seed{URL: e.URL, Lastmod: e.Lastmod, Priority: e.Priority, HasPriority: e.HasPriority}
		}
		fromSitemaps = job.AddSitemapEntries(entries)
		problems = res.Problems
		if len(job.Seeds) == 0 {
			return CreateResponse{}, &Error{Kind: Invalid, Msg: "invalid request",
				Fields:          jobs.FieldErrors{{Field: "sitemap_urls", Message: "no valid seeds: the sitemaps listed no usable URL"}},
				SitemapProblems: problems}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.exists(id); err != nil {
		return CreateResponse{}, err
	}
	// The id is free as far as this server knows; other API servers may
	// be accepting it right now: the control topic decides.
	owned, err := s.control.Claim(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			// The client went away: the claim, if written, keeps the id taken.
			return CreateResponse{}, fmt.Errorf("claim crawl id: %w", ctx.Err())
		}
		s.log.Error("claim crawl id failed", telemetry.Crawl(id), zap.Error(err))
		return CreateResponse{}, &Error{Kind: Unavailable, Msg: "claim crawl id: " + err.Error()}
	}
	if !owned {
		return CreateResponse{}, conflict(id)
	}
	if err := s.control.Publish(ctx, job.Spec); err != nil {
		s.log.Error("publish crawl spec failed", telemetry.Crawl(id), zap.Error(err))
		return CreateResponse{}, &Error{Kind: Unavailable, Msg: "publish crawl spec: " + err.Error()}
	}
	n, err := s.control.PublishSeeds(ctx, id, job.Seeds)
	if err != nil {
		s.log.Error("publish seeds failed", telemetry.Crawl(id), zap.Int("published", n), zap.Error(err))
		return CreateResponse{}, &Error{Kind: Unavailable, Msg: fmt.Sprintf("crawl created; %d of %d seeds published: %v", n, len(job.Seeds), err)}
	}
	s.log.Info("crawl created", telemetry.Crawl(id), zap.Int("seeds", n), zap.Int("invalid", len(job.Invalid)),
		zap.Int("from_sitemaps", fromSitemaps), zap.Int("sitemap_problems", len(problems)))
	return CreateResponse{CrawlView: view(job.Spec, true), SeedsPublished: n, InvalidSeeds: job.Invalid,
		SitemapURLs: fromSitemaps, SitemapProblems: problems}, nil
}

// exists refuses (Conflict) a crawl id that is taken, by a crawl or by a
// deleted crawl.
func (s *Service) exists(id string) error {
	spec := s.control.Get(id)
	switch {
	case spec == nil:
		return nil
	case crawlcontrol.Deleted(spec):
		return &Error{Kind: Conflict, Msg: fmt.Sprintf("crawl %q was deleted; its id stays taken", id),
			Fields: jobs.FieldErrors{{Field: "crawl_id", Message: "already used by a deleted crawl"}}}
	}
	return conflict(id)
}

// conflict is the Conflict of a crawl id that is taken (by a crawl, or by
// an earlier claim of another submission).
func conflict(id string) *Error {
	return &Error{Kind: Conflict, Msg: fmt.Sprintf("crawl %q exists", id),
		Fields: jobs.FieldErrors{{Field: "crawl_id", Message: "already used"}}}
}

// SetState pauses, resumes or cancels a crawl (idempotent: a crawl in
// state already is returned as it is); a refusal (no such crawl:
// NotFound, a cancelled crawl: Conflict, a deleted crawl: Gone) or a
// publishing failure (Unavailable) is an *Error.
func (s *Service) SetState(ctx context.Context, id string, state crawlv1.CrawlState) (CrawlView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spec := s.control.Get(id)
	switch {
	case spec == nil:
		return CrawlView{}, &Error{Kind: NotFound, Msg: fmt.Sprintf("no crawl %q", id)}
	case crawlcontrol.Deleted(spec):
		return CrawlView{}, &Error{Kind: Gone, Msg: fmt.Sprintf("crawl %q was deleted", id)}
	}
	if spec.GetState() == state {
		return view(spec, true), nil
	}
	next, err := jobs.Transition(spec, state, s.now())
	if err != nil {
		msg := err.Error()
		if StateReason(spec) == ReasonTimeLimit {
			msg += " (its time limit, limits.max_duration, has passed)"
		}
		return CrawlView{}, &Error{Kind: Conflict, Msg: msg}
	}
	if err := s.control.Publish(ctx, next); err != nil {
		s.log.Error("publish crawl spec failed", telemetry.Crawl(id), zap.Error(err))
		return CrawlView{}, &Error{Kind: Unavailable, Msg: "publish crawl spec: " + err.Error()}
	}
	s.log.Info("crawl state changed", telemetry.Crawl(id), zap.String("state", stateName(state)), zap.Uint64("revision", next.GetRevision()))
	return view(next, true), nil
}
