// Package envflag fills a flag.FlagSet from command-line arguments and from
// CRAWLER_* environment variables (12-factor): the flag "clickhouse-addr" is
// also read from CRAWLER_CLICKHOUSE_ADDR. An argument on the command line
// wins over the environment, which wins over the default.
package envflag

import (
	"flag"
	"fmt"
	"strings"
)

// Prefix is prepended to every environment variable name.
const Prefix = "CRAWLER_"

// EnvName returns the environment variable name for a flag name: Prefix
// followed by the name upper-cased, with '-' and '.' turned into '_'.
func EnvName(flagName string) string {
	var b strings.Builder
	b.Grow(len(Prefix) + len(flagName))
	b.WriteString(Prefix)
	for i := 0; i < len(flagName); i++ {
		c := flagName[i]
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c == '-' || c == '.':
			c = '_'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// Parse parses args into fs, then sets every flag not given on the command
// line from lookupEnv (pass os.LookupEnv from main; libraries never read the
// environment). An invalid environment value is an error naming the variable.
// A variable that is set but empty counts as set (it sets the flag to "").
func Parse(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) error {
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parse flags: %w", err) // errors.Is(err, flag.ErrHelp) still holds
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		name := EnvName(f.Name)
		v, ok := lookupEnv(name)
		if !ok {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			err = fmt.Errorf("parse environment variable %s=%q for flag -%s: %w", name, v, f.Name, serr)
		}
	})
	return err
}

// Strings is a repeatable string flag: every occurrence appends its value
// (fs.Var(&list, "seed", "…")). From the environment it takes one value.
type Strings []string

// String joins the values with spaces.
func (l *Strings) String() string { return strings.Join(*l, " ") }

// Set appends s.
func (l *Strings) Set(s string) error {
	*l = append(*l, s)
	return nil
}
