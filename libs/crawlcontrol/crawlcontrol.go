// Package crawlcontrol distributes crawl specifications (crawlv1.CrawlSpec:
// state, scope, limits, politeness and revisit policy) through the
// compacted control topic. The seeder's crawl API publishes them; every
// other service follows the topic into a Specs table and consults it per
// URL, so a pause, resume or cancel takes effect within seconds everywhere.
//
// A crawl's time limit (limits.max_duration) needs no publisher: a
// specification's state at a given time (StateAt) is CANCELLED once the
// limit has passed since its created_at, so every service that asks
// Specs.State obeys it at the same moment, and Specs.Changed fires then.
//
// The topic also carries scope grants (crawlv1.ScopeGrant, keyed
// "scope/<crawl id>/<site>"): the site a seed's redirect led to, joined to
// the scope of a crawl kept on its seeds' sites by the scheduler that
// admitted the redirect target. Followers fold them into Specs.Scoped, the
// specification the scope rules are compiled from; Specs.Get stays the
// seeder's.
package crawlcontrol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// Specs is the latest known specification of every crawl. The zero value
// is not usable; create with NewSpecs. Safe for concurrent use.
type Specs struct {
	mu    sync.RWMutex
	specs map[string]*crawlv1.CrawlSpec
	// changed is closed and replaced on every applied change, so waiters
	// can block until the table moves.
	changed chan struct{}

	// What the follower (FollowCaughtUp) has read, for Sync: its
	// control topic, the next offset of each partition, and a channel
	// closed and replaced at every record it reads.
	source   *kafkaio.Config
	next     map[int]int64
	progress chan struct{}
	// absent are the crawl ids a Sync found without a specification.
	absent map[string]bool

	// grants are every crawl's scope grants by key (ScopeGrantKey);
	// scoped is, for a crawl that has a specification and grants, its
	// specification with the grants folded into its seed sites (Scoped),
	// rebuilt when either changes.
	grants map[string]map[string]*crawlv1.ScopeGrant
	scoped map[string]*crawlv1.CrawlSpec

	// now is the clock State reads time limits with. timer closes
	// changed at armed, the next time limit to pass (zero: none armed);
	// fired is the last one it fired for, so that a clock that stands
	// still (tests) does not fire it again.
	now          func() time.Time
	timer        *time.Timer
	armed, fired time.Time
}

// NewSpecs returns an empty table that reads time limits on time.Now.
func NewSpecs() *Specs { return NewSpecsClock(time.Now) }

// NewSpecsClock returns an empty table whose State reads time limits on
// now (tests inject a clock; Changed still fires by the real clock, at
// the limit's distance from now's time).
func NewSpecsClock(now func() time.Time) *Specs {
	return &Specs{specs: make(map[string]*crawlv1.CrawlSpec), changed: make(chan struct{}),
		next: make(map[int]int64), progress: make(chan struct{}), absent: make(map[string]bool), now: now,
		grants: make(map[string]map[string]*crawlv1.ScopeGrant), scoped: make(map[string]*crawlv1.CrawlSpec)}
}

// SyncTimeout bounds how long GetSynced waits for the follower.
const SyncTimeout = 10 * time.Second

// GetSynced is Get for a service about to act on a crawl's record: when
// no specification of crawlID is known yet, it first waits (Sync, at most
// SyncTimeout) until the follower has read everything the control topic
// holds now, since the record may be on its way: the seeder publishes a
// crawl's specification before its seeds, but a follower can lag behind
// the pipeline (a parser under load applied a scope a second late and
// published links off-site). A crawl still without one afterwards runs on
// the defaults and is not waited for again. Without a follower (tests
// that Apply by hand) it is Get.
func (s *Specs) GetSynced(ctx context.Context, crawlID string) (*crawlv1.CrawlSpec, error) {
	if spec := s.Get(crawlID); spec != nil {
		return spec, nil
	}
	s.mu.RLock()
	known, following := s.absent[crawlID], s.source != nil
	s.mu.RUnlock()
	if known || !following {
		return nil, nil
	}
	sctx, cancel := context.WithTimeout(ctx, SyncTimeout)
	defer cancel()
	if err := s.Sync(sctx); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// A late follower must not stop the pipeline: the crawl runs on
		// the defaults, as it would have before.
		return s.Get(crawlID), nil
	}
	spec := s.Get(crawlID)
	if spec == nil {
		s.mu.Lock()
		s.absent[crawlID] = true
		s.mu.Unlock()
	}
	return spec, nil
}

// Sync waits until the follower has read every record the control topic
// holds when Sync is called, or ctx is done. Without a follower it
// returns at once.
func (s *Specs) Sync(ctx context.Context) error {
	s.mu.RLock()
	src := s.source
	s.mu.RUnlock()
	if src == nil {
		return nil
	}
	offsets, err := kafkaio.GroupOffsets(ctx, *src, src.GroupFor(probeGroup), src.Topics().Control)
	if err != nil {
		return fmt.Errorf("read end offsets of the control topic: %w", err)
	}
	for {
		s.mu.RLock()
		behind := false
		for _, p := range offsets {
			if p.End > p.First && s.next[p.Partition] < p.End {
				behind = true
			}
		}
		progress := s.progress
		s.mu.RUnlock()
		if !behind {
			return nil
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// read records that the follower (see following) read m.
func (s *Specs) read(m kafka.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Compaction keeps the latest record of every key, so the last
	// record of a partition is always there to be read.
	s.next[m.Partition] = max(s.next[m.Partition], m.Offset+1)
	close(s.progress)
	s.progress = make(chan struct{})
}

// following records that a follower of src started, so that Sync waits
// for it even before its first record.
func (s *Specs) following(src kafkaio.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.source == nil {
		s.source = &src
	}
}

// Get returns the specification of a crawl, or nil when none was published
// (the crawl then runs with the service's defaults). The returned message
// must not be modified.
func (s *Specs) Get(crawlID string) *crawlv1.CrawlSpec {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.specs[crawlID]
}

// State returns the crawl's state now (StateAt): RUNNING when unknown or
// unspecified, CANCELLED once its time limit has passed.
func (s *Specs) State(crawlID string) crawlv1.CrawlState {
	return StateAt(s.Get(crawlID), s.now())
}

// Deadline returns when spec's time limit ends its crawl: created_at plus
// limits.max_duration. ok is false without a time limit (none, or not
// positive) or without a creation time.
func Deadline(spec *crawlv1.CrawlSpec) (deadline time.Time, ok bool) {
	d := spec.GetLimits().GetMaxDuration()
	if d == nil || d.AsDuration() <= 0 || spec.GetCreatedAt() == nil {
		return time.Time{}, false
	}
	return spec.GetCreatedAt().AsTime().Add(d.AsDuration()), true
}

// StateAt returns the state spec puts its crawl in at now: RUNNING when
// spec is nil or says UNSPECIFIED; CANCELLED once its time limit has
// passed (Deadline at or before now) or when it is deleted, whatever it
// says; otherwise its state.
func StateAt(spec *crawlv1.CrawlSpec, now time.Time) crawlv1.CrawlState {
	if spec == nil {
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING
	}
	if Deleted(spec) {
		return crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	}
	if end, ok := Deadline(spec); ok && !now.Before(end) {
		return crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	}
	if spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_UNSPECIFIED {
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING
	}
	return spec.GetState()
}

// Deleted reports whether spec's crawl was deleted (deleted_at set): it
// is cancelled for good and its rows are being removed from ClickHouse.
func Deleted(spec *crawlv1.CrawlSpec) bool { return spec.GetDeletedAt() != nil }

// Effective returns spec as it stands at now, for what shows a crawl and
// acts on its state (the seeder's API and console): spec itself, or, when
// its time limit has passed while it says RUNNING, PAUSED or UNSPECIFIED,
// a copy that says CANCELLED, updated at its deadline, revision unchanged
// (a deleted spec that does not say CANCELLED: updated when deleted).
// spec is not modified; nil stays nil.
func Effective(spec *crawlv1.CrawlSpec, now time.Time) *crawlv1.CrawlSpec {
	if spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_CANCELLED ||
		StateAt(spec, now) != crawlv1.CrawlState_CRAWL_STATE_CANCELLED {
		return spec
	}
	end, ok := Deadline(spec)
	if Deleted(spec) && (!ok || spec.GetDeletedAt().AsTime().Before(end)) {
		end = spec.GetDeletedAt().AsTime()
	}
	out := proto.Clone(spec).(*crawlv1.CrawlSpec)
	out.State = crawlv1.CrawlState_CRAWL_STATE_CANCELLED
	out.UpdatedAt = timestamppb.New(end)
	return out
}

// EndedByTimeLimit reports whether a cancelled spec (as Effective returns
// it) was ended by its time limit: it has one and was not cancelled
// before its deadline (a cancel published after the deadline found the
// crawl ended already).
func EndedByTimeLimit(spec *crawlv1.CrawlSpec) bool {
	end, ok := Deadline(spec)
	return ok && spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_CANCELLED &&
		spec.GetUpdatedAt() != nil && !spec.GetUpdatedAt().AsTime().Before(end)
}

// All returns every known specification (the messages must not be
// modified), in no particular order.
func (s *Specs) All() []*crawlv1.CrawlSpec {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*crawlv1.CrawlSpec, 0, len(s.specs))
	for _, spec := range s.specs {
		out = append(out, spec)
	}
	return out
}

// Apply records spec unless a newer revision of the same crawl is already
// known; it reports whether the table changed.
func (s *Specs) Apply(spec *crawlv1.CrawlSpec) bool {
	if spec.GetCrawlId() == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.specs[spec.GetCrawlId()]; old != nil && old.GetRevision() > spec.GetRevision() {
		return false
	}
	s.specs[spec.GetCrawlId()] = spec
	s.foldLocked(spec.GetCrawlId())
	close(s.changed)
	s.changed = make(chan struct{})
	s.armLocked()
	return true
}

// armLocked sets the timer that closes changed when the next time limit
// of a crawl not cancelled passes, so that whoever waits on Changed (the
// scheduler's frontier pumps, which then drop the crawl's waiting URLs)
// learns of it without a new specification. The caller holds mu.
func (s *Specs) armLocked() {
	after := s.now()
	if s.fired.After(after) {
		after = s.fired
	}
	var next time.Time
	for _, spec := range s.specs {
		if spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_CANCELLED || Deleted(spec) {
			continue
		}
		if end, ok := Deadline(spec); ok && end.After(after) && (next.IsZero() || end.Before(next)) {
			next = end
		}
	}
	if next.Equal(s.armed) {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.armed = next
	if next.IsZero() {
		return
	}
	// A timer is no goroutine until it fires; expire runs briefly then.
	s.timer = time.AfterFunc(next.Sub(after), func() { s.expire(next) })
}

// expire closes changed for the time limit that passed at deadline and
// arms the next one.
func (s *Specs) expire(deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed.Equal(deadline) {
		return // re-armed for another deadline meanwhile
	}
	s.fired, s.armed, s.timer = deadline, time.Time{}, nil
	close(s.changed)
	s.changed = make(chan struct{})
	s.armLocked()
}

// Delete forgets a crawl (a tombstone on the topic).
func (s *Specs) Delete(crawlID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.specs[crawlID]; ok {
		delete(s.specs, crawlID)
		delete(s.scoped, crawlID)
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// Changed returns a channel closed at the next change of the table, or
// when the time limit of a crawl passes.
func (s *Specs) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

// Scoped is Get with the crawl's scope grants (Grant) folded into its
// scope's seed_hosts and seed_domains: the specification whose scope
// rules the services judge URLs by (libs/scope compiles it; a new grant
// is a new message, so a scope.Cache recompiles). Get stays the
// specification the seeder published, for whoever shows or revises it.
// The returned message must not be modified.
func (s *Specs) Scoped(crawlID string) *crawlv1.CrawlSpec {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if spec, ok := s.scoped[crawlID]; ok {
		return spec
	}
	return s.specs[crawlID]
}

// Grant records a scope grant (see ScopeGrantMessage) and reports whether
// it was new: a site already granted to the crawl is not granted again.
// A grant may come before its crawl's specification (they are records of
// different keys, possibly on different partitions): it is folded in when
// the specification comes. Grants only add sites.
func (s *Specs) Grant(g *crawlv1.ScopeGrant) bool {
	key, ok := grantSite(g)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	crawl := s.grants[g.GetCrawlId()]
	if crawl == nil {
		crawl = make(map[string]*crawlv1.ScopeGrant)
		s.grants[g.GetCrawlId()] = crawl
	}
	if _, ok := crawl[key]; ok {
		return false
	}
	crawl[key] = g
	s.foldLocked(g.GetCrawlId())
	return true
}

// Grants returns the scope grants of a crawl, ordered by grant time then
// site (the messages must not be modified).
func (s *Specs) Grants(crawlID string) []*crawlv1.ScopeGrant {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*crawlv1.ScopeGrant, 0, len(s.grants[crawlID]))
	for _, g := range s.grants[crawlID] {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *crawlv1.ScopeGrant) int {
		if c := a.GetGrantedAt().AsTime().Compare(b.GetGrantedAt().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(a.GetHost()+a.GetDomain(), b.GetHost()+b.GetDomain())
	})
	return out
}

// foldLocked rebuilds the scoped specification of a crawl: a copy of its
// specification whose seed_hosts and seed_domains also hold its grants'
// sites. The caller holds mu.
func (s *Specs) foldLocked(crawlID string) {
	spec, grants := s.specs[crawlID], s.grants[crawlID]
	if spec == nil || len(grants) == 0 {
		delete(s.scoped, crawlID)
		return
	}
	out := proto.Clone(spec).(*crawlv1.CrawlSpec)
	sc := out.GetScope()
	if sc == nil {
		sc = &crawlv1.Scope{}
		out.Scope = sc
	}
	for _, g := range grants {
		switch {
		case g.GetHost() != "":
			sc.SeedHosts = append(sc.SeedHosts, g.GetHost())
		case g.GetDomain() != "":
			sc.SeedDomains = append(sc.SeedDomains, g.GetDomain())
		}
	}
	s.scoped[crawlID] = out
}

// ErrNoCrawlID is returned when publishing a specification without an id.
var ErrNoCrawlID = errors.New("crawl spec without crawl id")

// Message encodes spec as a control-topic record keyed by its crawl id.
func Message(topic string, spec *crawlv1.CrawlSpec) (kafka.Message, error) {
	if spec.GetCrawlId() == "" {
		return kafka.Message{}, ErrNoCrawlID
	}
	return kafkaio.NewMessage(topic, []byte(spec.GetCrawlId()), spec)
}

// ClaimKeyPrefix starts the key of every claim record on the control
// topic ("claim/<crawl id>"): a crawl id never contains '/', so a claim
// never shares a key with a specification and compaction keeps both.
const ClaimKeyPrefix = "claim/"

// ClaimMessage encodes claim as a control-topic record keyed
// ClaimKeyPrefix + its crawl id: every claim of one id lands on one
// partition, in the order the broker appended them.
func ClaimMessage(topic string, claim *crawlv1.CrawlClaim) (kafka.Message, error) {
	if claim.GetCrawlId() == "" {
		return kafka.Message{}, ErrNoCrawlID
	}
	return kafkaio.NewMessage(topic, []byte(ClaimKeyPrefix+claim.GetCrawlId()), claim)
}

// IsClaim reports whether a control-topic record is a claim (or a claim
// key's tombstone) rather than a specification.
func IsClaim(m kafka.Message) bool { return strings.HasPrefix(string(m.Key), ClaimKeyPrefix) }

// ScopeGrantKeyPrefix starts the key of every scope grant on the control
// topic ("scope/<crawl id>/<host or domain>"): like a claim's, a key no
// crawl id can take, so compaction keeps the grants beside the
// specification they widen, and repeats of one grant collapse into one.
const ScopeGrantKeyPrefix = "scope/"

// ErrNoSite is returned when publishing a scope grant that names no site.
var ErrNoSite = errors.New("scope grant without host or domain")

// grantSite is the site of a valid grant (a crawl id, and a host or a
// domain, not both).
func grantSite(g *crawlv1.ScopeGrant) (string, bool) {
	if g.GetCrawlId() == "" || (g.GetHost() == "") == (g.GetDomain() == "") {
		return "", false
	}
	return g.GetHost() + g.GetDomain(), true
}

// ScopeGrantMessage encodes a scope grant as a control-topic record keyed
// ScopeGrantKeyPrefix + crawl id + "/" + its site. Write it with acks=all
// before anything of the granted site is fetched.
func ScopeGrantMessage(topic string, g *crawlv1.ScopeGrant) (kafka.Message, error) {
	if g.GetCrawlId() == "" {
		return kafka.Message{}, ErrNoCrawlID
	}
	site, ok := grantSite(g)
	if !ok {
		return kafka.Message{}, ErrNoSite
	}
	return kafkaio.NewMessage(topic, []byte(ScopeGrantKeyPrefix+g.GetCrawlId()+"/"+site), g)
}

// IsScopeGrant reports whether a control-topic record is a scope grant
// (or a grant key's tombstone).
func IsScopeGrant(m kafka.Message) bool { return strings.HasPrefix(string(m.Key), ScopeGrantKeyPrefix) }

// Follow reads the control topic of c from the beginning and keeps specs
// up to date until ctx is done. Undecodable records are reported through
// onError (may be nil) and skipped: one bad record must not stop the
// services from following the rest.
func Follow(ctx context.Context, c kafkaio.Config, specs *Specs, onError func(error)) error {
	return FollowCaughtUp(ctx, c, specs, nil, onError)
}

// probeGroup is a consumer group that never joins nor commits: asking for
// its offsets returns only the topic's first and end offsets.
const probeGroup = "control-probe"

// FollowCaughtUp is Follow that also calls caughtUp (may be nil) once,
// when every record present on the topic when it started has been applied,
// at once for an empty topic. Services that must not act before they know
// every crawl's state (the fetcher before fetching, the seeder's API
// before accepting crawl ids) wait for it.
//
// A partition whose last records were removed by compaction counts as read
// when a record reaches its high watermark.
func FollowCaughtUp(ctx context.Context, c kafkaio.Config, specs *Specs, caughtUp func(), onError func(error)) error {
	return FollowClaims(ctx, c, specs, caughtUp, nil, onError)
}

// FollowClaims is FollowCaughtUp that also hands every claim record
// (crawlv1.CrawlClaim, see ClaimMessage) to onClaim (may be nil: claims
// are skipped), in topic order with the specifications: when onClaim
// runs, specs holds every specification that precedes the claim on its
// partition (and possibly ones the caller applied itself). Calls of
// onClaim are serialized with the table's updates by the follower. The
// seeder's crawl API decides crawl-id ownership this way.
func FollowClaims(ctx context.Context, c kafkaio.Config, specs *Specs, caughtUp func(), onClaim func(*crawlv1.CrawlClaim, kafka.Message), onError func(error)) error {
	topic := c.Topics().Control
	offsets, err := kafkaio.GroupOffsets(ctx, c, c.GroupFor(probeGroup), topic)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("read end offsets of %s: %w", topic, err)
	}
	pending := make(map[int]int64) // partition -> its end offset at the start
	for _, p := range offsets {
		if p.End > p.First {
			pending[p.Partition] = p.End
		}
	}
	var once sync.Once
	notify := func() {
		if caughtUp != nil {
			once.Do(caughtUp)
		}
	}
	if len(pending) == 0 {
		notify()
	}
	specs.following(c)
	// kafkaio.Follow serializes calls: pending needs no lock.
	err = kafkaio.Follow(ctx, c, topic, func(m kafka.Message) {
		apply(specs, m, onClaim, onError)
		specs.read(m)
		if end, ok := pending[m.Partition]; ok && (m.Offset+1 >= end || (m.HighWaterMark > 0 && m.Offset+1 >= m.HighWaterMark)) {
			delete(pending, m.Partition)
			if len(pending) == 0 {
				notify()
			}
		}
	})
	if err != nil {
		return fmt.Errorf("follow control topic: %w", err)
	}
	return nil
}

// apply records one control-topic record in specs, or hands a claim to
// onClaim.
func apply(specs *Specs, m kafka.Message, onClaim func(*crawlv1.CrawlClaim, kafka.Message), onError func(error)) {
	if IsScopeGrant(m) {
		if m.Value == nil {
			return // grants only add; a grant key's tombstone deletes no crawl
		}
		g := &crawlv1.ScopeGrant{}
		if err := kafkaio.Decode(m, g); err != nil {
			if onError != nil {
				onError(fmt.Errorf("decode scope grant at offset %d: %w", m.Offset, err))
			}
			return
		}
		if _, ok := grantSite(g); !ok {
			if onError != nil {
				onError(fmt.Errorf("scope grant at offset %d: %w", m.Offset, ErrNoSite))
			}
			return
		}
		specs.Grant(g)
		return
	}
	if IsClaim(m) {
		if onClaim == nil || m.Value == nil {
			return // not a specification; a claim key's tombstone deletes no crawl
		}
		claim := &crawlv1.CrawlClaim{}
		if err := kafkaio.Decode(m, claim); err != nil {
			if onError != nil {
				onError(fmt.Errorf("decode crawl claim at offset %d: %w", m.Offset, err))
			}
			return
		}
		onClaim(claim, m)
		return
	}
	if m.Value == nil {
		specs.Delete(string(m.Key))
		return
	}
	spec := &crawlv1.CrawlSpec{}
	if err := kafkaio.Decode(m, spec); err != nil {
		if onError != nil {
			onError(fmt.Errorf("decode crawl spec at offset %d: %w", m.Offset, err))
		}
		return
	}
	specs.Apply(spec)
}

// Snapshot reads the control topic of c up to the records it holds now
// into a new table and returns it (the launcher's summary reads a crawl's
// scope grants this way).
func Snapshot(ctx context.Context, c kafkaio.Config) (*Specs, error) {
	specs := NewSpecs()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	caughtUp := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- FollowCaughtUp(ctx, c, specs, func() { close(caughtUp) }, nil) }()
	select {
	case <-caughtUp:
		cancel()
		if err := <-done; err != nil {
			return nil, fmt.Errorf("read the control topic: %w", err)
		}
		return specs, nil
	case err := <-done:
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("read the control topic: %w", err)
	}
}
