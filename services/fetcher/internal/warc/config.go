package warc

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// Config is the archive's part of the fetcher's flags.
type Config struct {
	Dir          string        // --warc-dir: where WARC files are written; "" (default): no archive
	Prefix       string        // --warc-prefix (default "trawl")
	MaxFileSize  int64         // --warc-max-file-bytes: a file is closed once this size is reached (default 1 GiB)
	MaxFileAge   time.Duration // --warc-max-file-age (default 1h)
	MaxDigests   int           // --warc-digests: payload digests remembered for revisit records (default 100000)
	MaxOpenFiles int           // --warc-max-open-files: crawls with a file open at once (default 16)
	Fsync        bool          // --warc-fsync: fsync every fetch's records before it is acked
	HuffmanOnly  bool          // --warc-huffman-only: Huffman-coded members, half the CPU, half as many bytes again
}

// RegisterFlags registers the --warc-* flags on fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Dir, "warc-dir", "", "when set, archive every fetch as WARC/1.1 files in this directory (one fetcher per directory)")
	fs.StringVar(&c.Prefix, "warc-prefix", DefaultPrefix, "prefix of the WARC file names")
	fs.Int64Var(&c.MaxFileSize, "warc-max-file-bytes", DefaultMaxFileSize, "a WARC file is closed after the fetch that takes it to this size")
	fs.DurationVar(&c.MaxFileAge, "warc-max-file-age", DefaultMaxFileAge, "a WARC file is closed this long after it was opened")
	fs.IntVar(&c.MaxOpenFiles, "warc-max-open-files", DefaultMaxOpenFiles, "files open at once, one per crawl: a crawl that needs one while as many are open closes the least recently used")
	fs.IntVar(&c.MaxDigests, "warc-digests", DefaultMaxDigests, "payload digests remembered to write revisit records for identical payloads (0: none)")
	fs.BoolVar(&c.HuffmanOnly, "warc-huffman-only", false, "compress WARC records with Huffman coding only, not DEFLATE level 1: about half the archive's CPU per page for about 50% more bytes on disk")
	fs.BoolVar(&c.Fsync, "warc-fsync", false, "fsync the records of every fetch before it is acknowledged (survives a machine crash, costs a disk flush per fetch)")
}

// Validate reports flags that cannot work.
func (c Config) Validate() error {
	if c.Dir == "" {
		return nil
	}
	var errs []error
	if c.MaxFileSize < 1<<20 {
		errs = append(errs, fmt.Errorf("warc-max-file-bytes: %d is below 1 MiB", c.MaxFileSize))
	}
	if c.MaxFileAge < time.Second {
		errs = append(errs, fmt.Errorf("warc-max-file-age: %v is below 1s", c.MaxFileAge))
	}
	if c.MaxOpenFiles < 0 {
		errs = append(errs, fmt.Errorf("warc-max-open-files: %d must not be negative", c.MaxOpenFiles))
	}
	if c.MaxDigests < 0 {
		errs = append(errs, fmt.Errorf("warc-digests: %d must not be negative", c.MaxDigests))
	}
	return errors.Join(errs...)
}

// Options returns the Writer's options for a fetcher with the given
// instance id, User-Agent and body cap, naming the crawl specs in each
// file's warcinfo.
func (c Config) Options(instance, userAgent string, maxBodyBytes int64, specs func() []*crawlv1.CrawlSpec) Options {
	digests := c.MaxDigests
	if digests == 0 {
		digests = -1 // none (Options: 0 is the default)
	}
	return Options{Dir: c.Dir, Prefix: c.Prefix, Instance: instance, MaxFileSize: c.MaxFileSize, MaxFileAge: c.MaxFileAge,
		MaxOpenFiles: c.MaxOpenFiles, MaxDigests: digests, Fsync: c.Fsync, HuffmanOnly: c.HuffmanOnly, MaxBodyBytes: maxBodyBytes, UserAgent: userAgent, Specs: specs}
}
