package browser

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/rendersniff"
)

// Config is the browser's part of the fetcher's flags (--render-*).
type Config struct {
	Mode         string        // --render: never (default), auto or always (rendersniff.Mode)
	Tabs         int           // --render-tabs: pages loaded at once (default 2)
	PageTimeout  time.Duration // --render-timeout: bound of a page load (default 10s)
	MaxRequests  int           // --render-max-requests: requests of a page load (default 50)
	Exec         string        // --chromium: the Chromium binary ("" : found on the PATH)
	RestartAfter int           // --render-restart-after: page loads before Chromium starts afresh (default 1000)
}

// Defaults of Config.
const (
	DefaultRenderTabs   = 2
	DefaultRenderTime   = 10 * time.Second
	DefaultRenderMax    = 50
	DefaultRestartAfter = 1000
)

// RegisterFlags registers the --render-* flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Mode, "render", "never", "render pages in headless Chromium within their host's turn: never, auto (the pages whose HTML is a shell that scripts build: see internal/rendersniff) or always (every HTML page)")
	fs.IntVar(&c.Tabs, "render-tabs", DefaultRenderTabs, "pages rendered at once (each tab costs 70-170 MiB of Chromium's memory)")
	fs.DurationVar(&c.PageTimeout, "render-timeout", DefaultRenderTime, "bound of a page load in the browser; the DOM as it stands then is kept")
	fs.IntVar(&c.MaxRequests, "render-max-requests", DefaultRenderMax, "requests a page load may make (the page's scripts, styles and data)")
	fs.StringVar(&c.Exec, "chromium", "", "the Chromium binary (default: chromium on the PATH)")
	fs.IntVar(&c.RestartAfter, "render-restart-after", DefaultRestartAfter, "page loads after which Chromium is started afresh, bounding what it leaks (0: never)")
}

// Render returns the mode (never when the flag does not parse: Validate
// reports it).
func (c Config) Render() rendersniff.Mode {
	m, _ := rendersniff.ParseMode(c.Mode)
	return m
}

// Validate reports flags that cannot work.
func (c Config) Validate() error {
	if _, err := rendersniff.ParseMode(c.Mode); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	if c.Render() == rendersniff.Never {
		return nil
	}
	var errs []error
	if c.Tabs < 1 || c.Tabs > 64 {
		errs = append(errs, fmt.Errorf("render-tabs: %d not in [1, 64]", c.Tabs))
	}
	if c.PageTimeout < time.Second {
		errs = append(errs, fmt.Errorf("render-timeout: %v is below 1s", c.PageTimeout))
	}
	if c.MaxRequests < 1 {
		errs = append(errs, fmt.Errorf("render-max-requests: %d must be positive", c.MaxRequests))
	}
	if c.RestartAfter < 0 {
		errs = append(errs, fmt.Errorf("render-restart-after: %d must not be negative", c.RestartAfter))
	}
	return errors.Join(errs...)
}

// Options returns the Browser's options for a fetcher sending userAgent.
func (c Config) Options(userAgent string) Options {
	return Options{Exec: c.Exec, Tabs: c.Tabs, UserAgent: userAgent, PageTimeout: c.PageTimeout,
		MaxRequests: c.MaxRequests, RestartAfter: c.RestartAfter}
}
