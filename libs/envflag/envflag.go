// Package envflag fills a flag.FlagSet from command-line arguments and from
// CRAWLER_* environment variables (12-factor): the flag "clickhouse-addr" is
// also read from CRAWLER_CLICKHOUSE_ADDR. An argument on the command line
// wins over the environment, which wins over the default.
package envflag

import "flag"

// Prefix is prepended to every environment variable name.
const Prefix = "CRAWLER_"

// EnvName returns the environment variable name for a flag name.
func EnvName(flagName string) string { panic("unimplemented") }

// Parse parses args into fs, then sets every flag not given on the command
// line from lookupEnv (pass os.LookupEnv from main; libraries never read the
// environment). An invalid environment value is an error naming the variable.
func Parse(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) error {
	panic("unimplemented")
}
