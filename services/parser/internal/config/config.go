// Package config is the parser's configuration: its flags (and their
// CRAWLER_* variables), defaults and validation.
package config

import (
	"errors"
	"flag"

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

// RegisterFlags binds the fields to flags with their defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.Telemetry.RegisterFlags(fs)
	c.Kafka.RegisterFlags(fs)
	c.ClickHouse.RegisterFlags(fs)
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
