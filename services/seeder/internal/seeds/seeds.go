// Package seeds reads seed URLs: a seeds file (one URL per line, blank
// lines and # comments ignored) or single values, each validated and
// canonicalized with urlcanon. It is pure: no I/O beyond the given reader.
package seeds

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// MaxLineBytes is the longest line read (line ending and surrounding
// whitespace aside); a longer line is reported as
// ErrLineTooLong and skipped, the rest of the file is still read.
const MaxLineBytes = 64 << 10

// ErrLineTooLong reports a line longer than MaxLineBytes.
var ErrLineTooLong = errors.New("line too long")

// ErrInvalidUTF8 reports a line that is not valid UTF-8.
var ErrInvalidUTF8 = errors.New("invalid utf-8")

// maxRawBytes caps LineError.Raw so a report stays readable.
const maxRawBytes = 200

const bom = "\uFEFF"

// Seed is one valid seed.
type Seed struct {
	Line int    // 1-based line number (0 for a seed given outside a file)
	URL  string // canonical
}

// LineError is one rejected line.
type LineError struct {
	Line int    // 1-based line number
	Raw  string // the trimmed line, cut to 200 bytes
	Err  error  // ErrLineTooLong, ErrInvalidUTF8, or a urlcanon error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

func (e LineError) Unwrap() error { return e.Err }

// Read reads a seeds file: one URL per line (LF or CRLF), surrounding
// whitespace trimmed, a leading UTF-8 byte order mark ignored, blank lines
// and lines starting with # skipped. Valid seeds come back canonical, in
// file order; invalid lines come back as LineErrors and do not stop the
// read. The error is only a read error of r.
func Read(r io.Reader) ([]Seed, []LineError, error) {
	var (
		seeds []Seed
		bad   []LineError
	)
	br := bufio.NewReaderSize(r, 4096)
	for line := 1; ; line++ {
		text, tooLong, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return seeds, bad, fmt.Errorf("read seeds line %d: %w", line, err)
		}
		if errors.Is(err, io.EOF) && text == "" && !tooLong {
			return seeds, bad, nil
		}
		if line == 1 {
			text = strings.TrimPrefix(text, bom)
		}
		text = strings.TrimSpace(text)
		switch {
		case tooLong || len(text) > MaxLineBytes:
			bad = append(bad, LineError{Line: line, Raw: cut(text), Err: ErrLineTooLong})
		case text == "" || strings.HasPrefix(text, "#"):
		default:
			u, err := Parse(text)
			if err != nil {
				bad = append(bad, LineError{Line: line, Raw: cut(text), Err: err})
				break
			}
			seeds = append(seeds, Seed{Line: line, URL: u})
		}
		if errors.Is(err, io.EOF) {
			return seeds, bad, nil
		}
	}
}

// ErrEmpty reports a blank seed value.
var ErrEmpty = errors.New("empty seed")

// Parse validates one seed value (a --seed flag): surrounding whitespace
// trimmed, valid UTF-8, a URL urlcanon accepts. It returns the canonical
// URL.
func Parse(raw string) (string, error) {
	text := strings.TrimSpace(raw)
	switch {
	case text == "":
		return "", ErrEmpty
	case !utf8.ValidString(text):
		return "", ErrInvalidUTF8
	}
	return urlcanon.Canonicalize(text)
}

// readLine reads one line without its line ending. A line longer than
// MaxLineBytes is consumed to its end and reported with tooLong, its text
// cut. err is io.EOF on the last line (text may be non-empty).
func readLine(br *bufio.Reader) (text string, tooLong bool, err error) {
	var b []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(b)+len(chunk) > MaxLineBytes+2 { // +2: the CRLF ending
				tooLong = true
				b = append(b, chunk[:min(len(chunk), maxRawBytes)]...)
			} else {
				b = append(b, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return strings.TrimRight(string(b), "\r\n"), tooLong, err
		}
		return strings.TrimRight(string(b), "\r\n"), tooLong, nil
	}
}

// cut shortens s to at most maxRawBytes on a rune boundary and makes it
// valid UTF-8, for reporting.
func cut(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxRawBytes {
		return s
	}
	n := maxRawBytes
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
