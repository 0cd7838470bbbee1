package consume

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/libs/chstore/rows"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/emit"
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
		if s.robots.Restore(emit.RobotsRecord(row)) {
			restored++
		}
	})
	if err != nil {
		log.Warn("started without stored robots.txt, fetching it again", zap.Int("restored", restored), zap.Error(err))
	}
	s.m.robotsRestored.Add(float64(restored))
}

// robotsRows returns the row that stores rules for the next owner of
// host (emit.Encoder.RobotsRow): none when robots.txt is not stored, or
// when it could not be obtained.
func (s *Service) robotsRows(part int, host string, rules *robots.Rules) []rows.RobotsRow {
	if s.opts.RobotsTxt == nil {
		return nil
	}
	row, ok := s.enc.RobotsRow(part, host, rules)
	if !ok {
		return nil
	}
	return []rows.RobotsRow{row}
}
