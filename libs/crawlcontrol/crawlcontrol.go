// Package crawlcontrol distributes crawl specifications (crawlv1.CrawlSpec:
// state, scope, limits, politeness and revisit policy) through the
// compacted control topic. The seeder's crawl API publishes them; every
// other service follows the topic into a Specs table and consults it per
// URL, so a pause, resume or cancel takes effect within seconds everywhere.
package crawlcontrol

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/segmentio/kafka-go"

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
}

// NewSpecs returns an empty table.
func NewSpecs() *Specs {
	return &Specs{specs: make(map[string]*crawlv1.CrawlSpec), changed: make(chan struct{})}
}

// Get returns the specification of a crawl, or nil when none was published
// (the crawl then runs with the service's defaults). The returned message
// must not be modified.
func (s *Specs) Get(crawlID string) *crawlv1.CrawlSpec {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.specs[crawlID]
}

// State returns the crawl's state; RUNNING when unknown or unspecified.
func (s *Specs) State(crawlID string) crawlv1.CrawlState {
	spec := s.Get(crawlID)
	if spec == nil || spec.GetState() == crawlv1.CrawlState_CRAWL_STATE_UNSPECIFIED {
		return crawlv1.CrawlState_CRAWL_STATE_RUNNING
	}
	return spec.GetState()
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
	close(s.changed)
	s.changed = make(chan struct{})
	return true
}

// Delete forgets a crawl (a tombstone on the topic).
func (s *Specs) Delete(crawlID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.specs[crawlID]; ok {
		delete(s.specs, crawlID)
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// Changed returns a channel closed at the next change of the table.
func (s *Specs) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
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
	// kafkaio.Follow serializes calls: pending needs no lock.
	err = kafkaio.Follow(ctx, c, topic, func(m kafka.Message) {
		apply(specs, m, onError)
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

// apply records one control-topic record in specs.
func apply(specs *Specs, m kafka.Message, onError func(error)) {
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
