// Package pagebudget is the one estimator of how much of a crawl's page
// budget is used, shared by the fetchers (which charge a page when they
// take its first attempt: services/fetcher/internal/budget) and the
// schedulers (which admit URLs up to a ceiling above it:
// services/scheduler/internal/budget). Each process knows exactly what it
// charged itself and, from a periodic global count in ClickHouse, what
// every process had charged when the count started:
//
//	used = max(local, remote + since)
//
// where local is this process's own count (exact), remote the last global
// count and since what this process charged after that count started.
// Counting since from the count's start keeps a charge from being counted
// twice (in remote because it was recorded before the count read the
// table, and in since because it came after), and the max keeps what this
// process charged but had not recorded yet when the count ran. With one
// process the estimate is exact but for those in-flight charges; with N,
// each misses what the others charged since its last count: a crawl
// overshoots its budget by at most the other processes' rate times the
// refresh interval plus the time a charge takes to be recorded and the
// count to run. The callers' packages state their own bounds.
package pagebudget

// Estimate is one crawl's bookkeeping in one process. The zero value is an
// empty estimate. Not safe for concurrent use: its owner's lock guards it.
type Estimate struct {
	Local  int64 // charged by this process (exact)
	Remote int64 // the last global count
	Since  int64 // charged here since the last global count started
}

// Used returns the pages the crawl has used, as this process knows it.
func (e *Estimate) Used() int64 { return max(e.Local, e.Remote+e.Since) }

// Exhausted reports whether limit pages are used (limit <= 0: never).
func (e *Estimate) Exhausted(limit int64) bool { return limit > 0 && e.Used() >= limit }

// Charge counts n pages charged here (negative: given back).
func (e *Estimate) Charge(n int64) {
	e.Local += n
	e.Since += n
}

// CountStarts marks the start of a global count; pass what it returns to
// Counted with the count's result.
func (e *Estimate) CountStarts() (started int64) { return e.Since }

// Counted applies a global count that started when CountStarts returned
// started: what was charged here before then is in remote now.
func (e *Estimate) Counted(remote, started int64) {
	e.Remote = remote
	e.Since -= started
}
