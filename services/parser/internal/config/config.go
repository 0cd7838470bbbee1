// Package config is the parser's configuration: its flags (and their
// CRAWLER_* variables), defaults and validation.
package config

import (
	"errors"
	"flag"
	"time"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/libs/service"
	"github.com/trawl-crawler/trawl/libs/telemetry"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// Config is everything the parser is configured with.
type Config struct {
	Telemetry  telemetry.Config
	Kafka      kafkaio.Config
	ClickHouse chstore.Config
	Parser     pages.Config
}

// DefaultClickHouseFlush is the parser's --clickhouse-flush-interval
// default. A page is stored (and its record committed) once its rows are
// inserted, so the interval is part of the lag from fetch to stored and
// of the lag the fetchers hold back at (--max-downstream-lag, 15 s); its
// writers insert at once when a partition's window fills, so it bounds
// no rate. ClickHouse 18.16 merges the whole of a small table into each
// of its new parts (its merge selector adds a fixed 5 MiB to every
// part's size): in a crawl of 228 000 requests, content_seen_v2,
// links_dropped and document_meta at 2 s made 652 parts and 6.1 M rows
// merged; at 5 s, 258 parts and 2.1 M, the lag from fetch to stored max
// 17 -> 19 s (at 10 s: 231 parts, 2.2 M, 22 s).
const DefaultClickHouseFlush = 5 * time.Second

// RegisterFlags binds the fields to flags with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlagsFlushing(fs, DefaultClickHouseFlush)
	c.Parser.RegisterFlags(fs)
}

// Validate reports every configuration error.
func (c Config) Validate() error {
	return errors.Join(c.Telemetry.Validate(), c.Kafka.Validate(), c.ClickHouse.Validate(), c.Parser.Validate())
}

// Load parses args and the environment into a validated Config
// (errors.Is(err, flag.ErrHelp) after -h).
func Load(args []string, lookupEnv func(string) (string, bool)) (Config, error) {
	return service.Load[Config]("parser", args, lookupEnv)
}
