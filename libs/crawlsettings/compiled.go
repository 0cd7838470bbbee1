package crawlsettings

import (
	"errors"
	"strings"
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

// maxCompiled bounds the crawls whose values a Compiled keeps (crawls
// running at once are far fewer); beyond it the table starts over.
const maxCompiled = 4096

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
	if len(c.m) >= maxCompiled {
		clear(c.m) // each crawl's is compiled again once
	}
	c.m[crawlID] = compiled[T]{revision: spec.GetRevision(), spec: spec, value: v}
	return v
}

// Cache resolves the settings of crawls on a fleet (Resolve) once per
// specification revision, so that a service reads a crawl's settings per
// request at the cost of a map look-up. Safe for concurrent use.
type Cache struct {
	compiled *Compiled[Settings]
}

// NewCache returns a Cache of the settings of crawls on fleet f. refused
// (may be nil) is called once per revision whose identity is partly
// refused (Settings.IdentityRefused), with why.
func NewCache(f Fleet, refused func(crawlID string, err error)) *Cache {
	return &Cache{compiled: NewCompiled(func(spec *crawlv1.CrawlSpec) (Settings, error) {
		s := Resolve(spec, f)
		if len(s.IdentityRefused) > 0 {
			return s, errors.New(strings.Join(s.IdentityRefused, "; "))
		}
		return s, nil
	}, refused)}
}

// Of returns the settings of crawlID, whose current specification is spec
// (nil: none, the fleet's settings).
func (c *Cache) Of(crawlID string, spec *crawlv1.CrawlSpec) Settings {
	return c.compiled.Get(crawlID, spec)
}
