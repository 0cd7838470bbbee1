package warc

import "sync"

// memory is a bounded map that forgets its oldest entry first (FIFO): the
// payload digests already archived (for revisit records) and the attempts
// archived (to count duplicates after a re-delivery). Safe for concurrent
// use.
type memory[V any] struct {
	mu    sync.Mutex
	max   int
	m     map[string]V
	order []string // ring of keys in insertion order
	next  int      // ring position of the oldest key once full
}

func newMemory[V any](limit int) *memory[V] {
	return &memory[V]{max: limit, m: make(map[string]V, max(0, min(limit, 1024)))}
}

// get returns the value of key.
func (m *memory[V]) get(key string) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[key]
	return v, ok
}

// put remembers key (a known key keeps its place and takes v), forgetting
// the oldest key when full.
func (m *memory[V]) put(key string, v V) {
	if m.max <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[key]; ok {
		m.m[key] = v
		return
	}
	if len(m.order) < m.max {
		m.order = append(m.order, key)
	} else {
		delete(m.m, m.order[m.next])
		m.order[m.next] = key
		m.next = (m.next + 1) % m.max
	}
	m.m[key] = v
}

// len returns the number of keys remembered.
func (m *memory[V]) len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
