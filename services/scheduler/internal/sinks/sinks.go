// Package sinks is the scheduler's ClickHouse side: it builds the batch
// writers and runs them as Flush components of the service harness (they
// stop, flushing what they buffered, only once both consumer groups have
// closed their handlers: in-flight batches still write to them), and
// holds the adapters that query the tables: the frontier (Frontier, a
// frontier.Store), the revisit schedule (Revisits) and the url_seen counts
// of the page budgets (CountSeen, CountHosts). The packages that decide
// (admit, frontier, revisit) see only row types (libs/chstore/rows).
package sinks

import (
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/service"
)

// Writers are the scheduler's batch writers, one per table.
type Writers struct {
	Seen     *chstore.BatchWriter[chstore.SeenRow]     // url_seen
	Events   *chstore.BatchWriter[chstore.URLEventRow] // url_events
	Frontier *chstore.BatchWriter[chstore.FrontierRow] // frontier
	Revisits *chstore.BatchWriter[chstore.RevisitRow]  // revisits
	Changes  *chstore.BatchWriter[chstore.ChangeRow]   // change_history
}

// New returns the writers over store: url_seen and url_events batching
// by seen, the others by o.
func New(store *chstore.Store, o, seen chstore.BatchOptions, log *zap.Logger, reg prometheus.Registerer) *Writers {
	return &Writers{
		Seen:     chstore.NewBatchWriter(store, chstore.URLSeen, seen, log, reg),
		Events:   chstore.NewBatchWriter(store, chstore.URLEvents, seen, log, reg),
		Frontier: chstore.NewBatchWriter(store, chstore.Frontier, o, log, reg),
		Revisits: chstore.NewBatchWriter(store, chstore.Revisits, o, log, reg),
		Changes:  chstore.NewBatchWriter(store, chstore.ChangeHistory, o, log, reg),
	}
}

// Flush asks every writer to insert what it holds now (the consumer
// groups' OnFull and OnClose: their acks wait on these rows).
func (w *Writers) Flush() {
	w.Seen.Flush()
	w.Events.Flush()
	w.Frontier.Flush()
	w.Revisits.Flush()
	w.Changes.Flush()
}

// Go adds every writer to svc as a Flush component named "<table> writer".
func (w *Writers) Go(svc *service.Service) {
	svc.Go(service.Flush, chstore.URLSeen.Name+" writer", w.Seen.Run)
	svc.Go(service.Flush, chstore.URLEvents.Name+" writer", w.Events.Run)
	svc.Go(service.Flush, chstore.Frontier.Name+" writer", w.Frontier.Run)
	svc.Go(service.Flush, chstore.Revisits.Name+" writer", w.Revisits.Run)
	svc.Go(service.Flush, chstore.ChangeHistory.Name+" writer", w.Changes.Run)
}
