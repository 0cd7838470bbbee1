// Package warcdir is the layout of a fetcher's WARC directory (its
// --warc-dir) that the fetcher and the local launcher share: the names of
// the files, the directory's lock, and the removal of a deleted crawl's
// files. It reads and writes WARC files with the standard library only
// (gzip members, header lines), so that a tool removing a crawl does not
// link a WARC library.
//
// A file holds the records of one crawl, named
//
//	<prefix>-<crawl>-<YYYYMMDDhhmmss>-<serial>-<instance>.warc.gz
//
// (EncodeCrawl makes the crawl id a file name part without '-'), with its
// CDXJ index beside it (<file>.cdxj), written under <file>.open while
// open. Files written before crawls had files of their own are named
// <prefix>-<YYYYMMDDhhmmss>-<serial>-<instance>.warc.gz and may mix
// crawls ("legacy"): RemoveCrawl rewrites those without the crawl's
// records.
package warcdir

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// File name parts.
const (
	WarcSuffix  = ".warc.gz" // a closed WARC file
	IndexSuffix = ".cdxj"    // its CDXJ index: <file>.warc.gz.cdxj
	OpenSuffix  = ".open"    // a file being written (or an index)
	// rewriteSuffix marks the copy of a legacy file being rewritten
	// without a deleted crawl's records; one left by a crash is removed.
	rewriteSuffix = ".rewrite"
)

// stampLayout is the time in file names (UTC).
const stampLayout = "20060102150405"

// EncodeCrawl makes a crawl id a file name part: letters, digits, '.' and
// '_' are kept, every other byte (the '-' crawl ids may hold, and
// anything a file name cannot) is written ~xx (two lower-case hex
// digits). The encoding is one-to-one and holds no '-', so a file name
// names exactly one crawl.
func EncodeCrawl(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "~%02x", c)
		}
	}
	return b.String()
}

// DecodeCrawl reverses EncodeCrawl; ok is false for a part EncodeCrawl
// does not make.
func DecodeCrawl(part string) (id string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(part); i++ {
		c := part[i]
		switch {
		case c == '~':
			if i+2 >= len(part) {
				return "", false
			}
			v, err := strconv.ParseUint(part[i+1:i+3], 16, 8)
			if err != nil || EncodeCrawl(string([]byte{byte(v)})) != part[i:i+3] {
				return "", false // not hex, or a byte kept as it is, or upper case
			}
			b.WriteByte(byte(v))
			i += 2
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_':
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return b.String(), part != ""
}

// Name is the name of a crawl's WARC file without ".gz" (the writer
// appends it, and OpenSuffix while it writes).
func Name(prefix, crawlID string, at time.Time, serial int64, instance string) string {
	return fmt.Sprintf("%s-%s-%s-%05d-%s.warc", prefix, EncodeCrawl(crawlID), at.UTC().Format(stampLayout), serial, instance)
}

// crawlRE matches a crawl's file (any of the file, its index, their open
// and rewrite forms) after the prefix and '-'; legacyRE a legacy closed
// file.
var (
	crawlRE  = regexp.MustCompile(`^([A-Za-z0-9._~]+)-[0-9]{14}-[0-9]{5,}-.+\.warc\.gz(\.open|\.cdxj|\.cdxj\.open|\.rewrite)?$`)
	legacyRE = regexp.MustCompile(`^[0-9]{14}-[0-9]{5,}-.+\.warc\.gz$`)
)

// CrawlOf returns the crawl whose file name is (a WARC file, its index or
// their open forms, written with prefix); ok is false for any other name,
// a legacy file's included.
func CrawlOf(prefix, name string) (crawlID string, ok bool) {
	rest, ok := strings.CutPrefix(name, prefix+"-")
	if !ok {
		return "", false
	}
	m := crawlRE.FindStringSubmatch(rest)
	if m == nil {
		return "", false
	}
	return DecodeCrawl(m[1])
}

// Legacy reports whether name is a closed WARC file of the layout before
// crawls had files of their own (it may mix crawls).
func Legacy(prefix, name string) bool {
	if _, ok := CrawlOf(prefix, name); ok {
		return false
	}
	rest, ok := strings.CutPrefix(name, prefix+"-")
	return ok && legacyRE.MatchString(rest)
}

// Lock takes the exclusive lock of the WARC directory dir (created if
// missing): one process writes or changes a directory at a time. The lock
// goes with the process, or when the file is closed. A directory locked
// already is an error.
func Lock(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create warc directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open warc directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock warc directory %s (a fetcher writes there?): %w", dir, err)
	}
	return f, nil
}
