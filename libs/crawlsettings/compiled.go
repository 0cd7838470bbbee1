package crawlsettings

import (
	"sync"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// Compiled keeps what a crawl's specification compiles to (its scope
// rules, its priority rules), compiled once per revision: a service asks
// for it with the specification it holds now (a follower's current value),
// and it is compiled again only when that is another revision. Safe for
// concurrent use.
type Compiled[T any] struct {
	compile func(*crawlv1.CrawlSpec) (T, error)
	onError func(crawlID string, err error)

	mu sync.Mutex
	m  map[string]compiled[T]
}

type compiled[T any] struct {
	revision uint64
	spec     *crawlv1.CrawlSpec
	value    T
}

// NewCompiled returns a cache of compile's values; onError (may be nil) is
// called once per revision whose compile reported an error (the value it
// returned with the error is kept: compile keeps what is valid).
func NewCompiled[T any](compile func(*crawlv1.CrawlSpec) (T, error), onError func(crawlID string, err error)) *Compiled[T] {
	return &Compiled[T]{compile: compile, onError: onError, m: make(map[string]compiled[T])}
}

// Get returns the value of crawlID's current specification spec (not nil).
func (c *Compiled[T]) Get(crawlID string, spec *crawlv1.CrawlSpec) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[crawlID]; ok && e.spec == spec && e.revision == spec.GetRevision() {
		return e.value
	}
	v, err := c.compile(spec)
	if err != nil && c.onError != nil {
		c.onError(crawlID, err)
	}
	c.m[crawlID] = compiled[T]{revision: spec.GetRevision(), spec: spec, value: v}
	return v
}
