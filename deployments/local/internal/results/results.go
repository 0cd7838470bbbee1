// Package results takes a local crawl's results away: `crawl export`
// writes one crawl's rows of a table as a file (libs/chexport) and `crawl
// query` prints the answer to a SQL query. Both read the ClickHouse of a
// data directory: the one that already answers there (a crawl still
// running, or chserver), or a private server they start on the data
// directory's files and stop again when done.
package results

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/trawl-crawler/trawl/deployments/local/internal/chboot"
	"github.com/trawl-crawler/trawl/libs/chexport"
	"github.com/trawl-crawler/trawl/libs/chlocal"
	"github.com/trawl-crawler/trawl/libs/chstore"
)

// Source is the data directory whose results are read and how its
// ClickHouse is reached.
type Source struct {
	DataDir string // flag data-dir (default .crawl, as the launcher's)
	// ClickHouse: Addr (flag clickhouse-addr) is a server to use instead
	// of the data directory's own, as the launcher's flag; Database (flag
	// clickhouse-database, default crawler); the user, password file and
	// TLS flags of an existing server.
	ClickHouse chstore.Config
}

// RegisterFlags binds the fields to flags with defaults.
func (s *Source) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&s.DataDir, "data-dir", ".crawl", "data directory of the crawl (the launcher's --data-dir)")
	fs.Func("clickhouse-addr", "ClickHouse native host:port to read instead of the data directory's own server (as the launcher's flag)", func(v string) error {
		s.ClickHouse.Addr = nil
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				s.ClickHouse.Addr = append(s.ClickHouse.Addr, a)
			}
		}
		return nil
	})
	fs.StringVar(&s.ClickHouse.Database, "clickhouse-database", chstore.DefaultDatabase, "ClickHouse database of the crawl")
	s.ClickHouse.RegisterSecurityFlags(fs)
}

// Validate reports a configuration error.
func (s Source) Validate() error {
	if s.DataDir == "" {
		return errors.New("data-dir must not be empty")
	}
	c := s.ClickHouse
	c.Addr = []string{chstore.DefaultAddr} // checked for its database and security flags only
	c.DialTimeout = chstore.DefaultDialTimeout
	return c.Validate()
}

// ExportConfig is `crawl export`.
type ExportConfig struct {
	Source
	CrawlID string          // flag crawl-id (default: LastCrawl)
	Table   chexport.Table  // flag table
	Format  chexport.Format // flag format
	Out     string          // flag out ("" or -: standard output)
}

// RegisterFlags binds the fields to flags with defaults.
func (c *ExportConfig) RegisterFlags(fs *flag.FlagSet) {
	c.Source.RegisterFlags(fs)
	fs.StringVar(&c.CrawlID, "crawl-id", "", "crawl to export (default: the data directory's last crawl)")
	c.Table, c.Format = chexport.Documents, chexport.JSONL
	fs.Func("table", "table to export: documents, fetch_log, links or url_events (default documents)", func(v string) error {
		t, err := chexport.ParseTable(v)
		c.Table = t
		return err
	})
	fs.Func("format", "file format: jsonl, csv or parquet (default jsonl)", func(v string) error {
		f, err := chexport.ParseFormat(v)
		c.Format = f
		return err
	})
	fs.StringVar(&c.Out, "out", "", "file to write (default: standard output)")
}

// Validate reports a configuration error.
func (c ExportConfig) Validate() error {
	if _, err := chexport.ParseTable(string(c.Table)); err != nil {
		return fmt.Errorf("table: %w", err)
	}
	if _, err := chexport.ParseFormat(string(c.Format)); err != nil {
		return fmt.Errorf("format: %w", err)
	}
	return c.Source.Validate()
}

// QueryConfig is `crawl query`.
type QueryConfig struct {
	Source
	SQL string // the one argument
}

// Validate reports a configuration error.
func (c QueryConfig) Validate() error {
	if strings.TrimSpace(c.SQL) == "" {
		return errors.New(`want one SQL query as the argument: crawl query --data-dir DIR "SELECT …"`)
	}
	return c.Source.Validate()
}

// Export writes the export cfg asks for to cfg.Out, or to stdout; notes
// (which crawl, the server started, rows written) go to stderr. An output
// file appears only complete.
func Export(ctx context.Context, cfg ExportConfig, stdout, stderr io.Writer) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	var out *chexport.Output
	w := stdout
	if cfg.Out != "" && cfg.Out != "-" {
		// Before any server starts: an unwritable path fails at once.
		if out, err = chexport.CreateOutput(cfg.Out); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, out.Close()) }()
		w = out
	}
	store, stop, err := open(ctx, cfg.Source, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	// The data directory's database may predate the newest columns (an
	// older launcher): the services migrate at start, and so does this.
	if err := store.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate clickhouse: %w", err)
	}
	crawlID := cfg.CrawlID
	if crawlID == "" {
		if crawlID, err = LastCrawl(ctx, cfg.DataDir, store.Conn()); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "exporting the last crawl of %s: %s\n", cfg.DataDir, crawlID)
	}
	n, err := chexport.Export(ctx, store.Conn(), chexport.Request{CrawlID: crawlID, Table: cfg.Table, Format: cfg.Format}, w)
	if err != nil {
		return fmt.Errorf("export %s of crawl %s: %w", cfg.Table, crawlID, err)
	}
	if out != nil {
		if err := out.Commit(); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %d rows of %s (crawl %s) to %s\n", n, cfg.Table, crawlID, cfg.Out)
	}
	return nil
}

// ErrNoCrawl is returned (wrapped) by LastCrawl for a data directory that
// holds no crawl.
var ErrNoCrawl = errors.New("holds no crawl")

// LastCrawl names the data directory's last crawl: the one whose request
// the launcher wrote last (the newest <data-dir>/specs/<crawl-id>.json),
// or, when there is none, the crawl with the latest fetch in fetch_log.
// The one place that decides it, so that the rule can change.
func LastCrawl(ctx context.Context, dataDir string, q chexport.Querier) (string, error) {
	specs := filepath.Join(dataDir, "specs")
	entries, err := os.ReadDir(specs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read crawl specs: %w", err)
	}
	var (
		newest   string
		newestAt time.Time
	)
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || id == "" || e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed since it was listed
		}
		if newest == "" || info.ModTime().After(newestAt) {
			newest, newestAt = id, info.ModTime()
		}
	}
	if newest != "" {
		return newest, nil
	}
	rows, err := q.Query(ctx, "SELECT crawl_id, max(fetched_at) AS last FROM fetch_log GROUP BY crawl_id ORDER BY last DESC, crawl_id LIMIT 1")
	if err != nil {
		return "", fmt.Errorf("find the last crawl in fetch_log: %w", err)
	}
	defer rows.Close()
	var (
		id   string
		last time.Time
	)
	if rows.Next() {
		if err := rows.Scan(&id, &last); err != nil {
			return "", fmt.Errorf("find the last crawl in fetch_log: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("find the last crawl in fetch_log: %w", err)
	}
	if id == "" {
		return "", fmt.Errorf("data dir %s %w: no crawl spec in %s and no fetch in its ClickHouse (run a crawl first, or give --crawl-id)",
			dataDir, ErrNoCrawl, specs)
	}
	return id, nil
}

// Open is open for other commands on a data directory (crawl delete).
func Open(ctx context.Context, src Source, stderr io.Writer) (*chstore.Store, func() error, error) {
	return open(ctx, src, stderr)
}

// open connects to the data directory's ClickHouse: the server of
// --clickhouse-addr when it answers; else the data directory's own server
// when one runs there; else a private server started on the data
// directory's files. stop stops a server open started and closes the
// connection.
func open(ctx context.Context, src Source, stderr io.Writer) (*chstore.Store, func() error, error) {
	if fi, err := os.Stat(src.DataDir); err != nil || !fi.IsDir() {
		return nil, nil, fmt.Errorf("data dir %s does not exist: give the launcher's --data-dir", src.DataDir)
	}
	var (
		srv *chboot.Server
		err error
	)
	if len(src.ClickHouse.Addr) > 0 {
		if srv, err = chboot.Ensure(ctx, src.ClickHouse, src.DataDir, stderr); err != nil {
			return nil, nil, err
		}
	} else if srv, err = dataDirServer(ctx, src.DataDir, stderr); err != nil {
		return nil, nil, err
	}
	stopServer := func() error {
		if !srv.Private {
			return nil
		}
		if err := srv.Stop(); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "stopped clickhouse")
		return nil
	}
	c := src.ClickHouse
	c.Addr = strings.Split(srv.Addr, ",")
	if c.DialTimeout <= 0 {
		c.DialTimeout = chstore.DefaultDialTimeout
	}
	store, err := chstore.Open(ctx, c, nil)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("open clickhouse: %w", err), stopServer())
	}
	return store, func() error { return errors.Join(store.Close(), stopServer()) }, nil
}

// dataDirServer returns the server of dataDir/clickhouse: the one that
// answers at the address it was last started with, or one started now.
func dataDirServer(ctx context.Context, dataDir string, stderr io.Writer) (*chboot.Server, error) {
	dir := filepath.Join(dataDir, "clickhouse")
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("data dir %s %w: it has no ClickHouse data (%s); a crawl run against --clickhouse-addr is read with the same --clickhouse-addr",
			dataDir, ErrNoCrawl, dir)
	}
	if addr, err := chlocal.ConfiguredAddr(dir); err == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := chlocal.Ping(pctx, addr)
		cancel()
		if err == nil {
			fmt.Fprintf(stderr, "using the clickhouse running on %s at %s\n", dir, addr)
			return &chboot.Server{Addr: addr}, nil
		}
	}
	fmt.Fprintf(stderr, "starting clickhouse on %s (stopped when done)\n", dir)
	return chboot.Ensure(ctx, chstore.Config{}, dataDir, stderr)
}
