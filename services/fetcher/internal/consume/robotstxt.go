package consume

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/robots"
)

// RobotsStore loads the robots.txt entries stored for the hosts of a
// partition (*chstore.Store): the latest of each origin whose rules were
// selected for agent (with those of other agents, robots.Record.Columns)
// and that has not expired at now, at most limit, most recent first. fn runs on the calling goroutine. Safe for concurrent use;
// blocks for the query.
type RobotsStore interface {
	LoadRobots(ctx context.Context, partition int, agent string, now time.Time, limit int, fn func(rows.RobotsRow)) error
}

// restoreRobots fills the robots cache with what earlier owners of the
// partition's hosts fetched and is still valid, so that a restarted or
// newly assigned fetcher does not ask those sites for robots.txt again.
// A failed load costs requests, never correctness: those origins are
// fetched again.
func (s *Service) restoreRobots(ctx context.Context, part int, log *zap.Logger) {
	restored := 0
	err := s.opts.RobotsTxt.LoadRobots(ctx, part, s.robots.Agent(), s.opts.Now(), s.robots.MaxEntries(), func(row rows.RobotsRow) {
		if s.robots.Restore(robotsRecord(row)) {
			restored++
		}
	})
	if err != nil {
		log.Warn("started without stored robots.txt, fetching it again", zap.Int("restored", restored), zap.Error(err))
	}
	s.m.robotsRestored.Add(float64(restored))
}

// robotsRows returns the row that stores rules for the next owner of
// host: none when robots.txt is not stored, or when it could not be
// obtained (an Unavailable result is no valid robots.txt).
func (s *Service) robotsRows(part int, host string, rules *robots.Rules) []rows.RobotsRow {
	if s.opts.RobotsTxt == nil {
		return nil
	}
	rec, ok := rules.Record()
	if !ok {
		return nil
	}
	agent, text := rec.Columns()
	return []rows.RobotsRow{{
		Partition:    uint16(part),
		Origin:       rec.Origin,
		Host:         host,
		Agent:        agent,
		Outcome:      string(rec.Outcome),
		Status:       uint16(min(max(rec.Status, 0), 65535)),
		Rules:        text,
		CrawlDelayMs: uint32(rec.CrawlDelay.Milliseconds()),
		Sitemaps:     rec.Sitemaps,
		BodyBytes:    uint32(max(rec.BodyBytes, 0)),
		FetchedAt:    rec.FetchedAt,
		Expires:      rec.Expires,
		Fetcher:      s.opts.InstanceID,
	}}
}

// robotsRecord is the cache's form of a stored row (its agent and rules
// columns hold the rules of every agent the robots.txt was compiled for:
// robots.Record.Columns).
func robotsRecord(row rows.RobotsRow) robots.Record {
	rec := robots.Record{
		Origin:     row.Origin,
		Outcome:    robots.Outcome(row.Outcome),
		Status:     int(row.Status),
		CrawlDelay: time.Duration(row.CrawlDelayMs) * time.Millisecond,
		Sitemaps:   row.Sitemaps,
		BodyBytes:  int(row.BodyBytes),
		FetchedAt:  row.FetchedAt,
		Expires:    row.Expires,
	}
	rec.SetColumns(row.Agent, row.Rules)
	return rec
}
