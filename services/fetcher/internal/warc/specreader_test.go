package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1" // WARC digests are SHA-1 by convention
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// specRecord is one record as read by specRead, a reader written from the
// WARC 1.1 grammar (section 4) independently of gowarc:
//
//	warc-record = header CRLF block CRLF CRLF
//	header      = version warc-fields
//	version     = "WARC/1.1" CRLF
//	warc-fields = *named-field CRLF
//	named-field = field-name ":" [ field-value ]   (continuation lines start with SP or HT)
type specRecord struct {
	offset, length int64 // of its gzip member in the file
	fields         map[string]string
	block          []byte
}

func (r specRecord) get(name string) string { return r.fields[strings.ToLower(name)] }

// specRead reads the WARC file at path: one gzip member per record, each
// record parsed by the grammar; Content-Length, WARC-Block-Digest and
// WARC-Payload-Digest (where the payload is in the block) are verified.
func specRead(path string) ([]specRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	br := bytes.NewReader(data)
	var out []specRecord
	for br.Len() > 0 {
		start := int64(len(data) - br.Len())
		zr, err := gzip.NewReader(br) // bytes.Reader is a ByteReader: reads exactly one member
		if err != nil {
			return out, fmt.Errorf("member at %d: %w", start, err)
		}
		zr.Multistream(false)
		raw, err := io.ReadAll(zr)
		if err != nil {
			return out, fmt.Errorf("member at %d: %w", start, err)
		}
		rec, err := specParse(raw)
		if err != nil {
			return out, fmt.Errorf("record at %d: %w", start, err)
		}
		rec.offset, rec.length = start, int64(len(data)-br.Len())-start
		if err := specVerify(rec); err != nil {
			return out, fmt.Errorf("record at %d (%s %s): %w", start, rec.get("WARC-Type"), rec.get("WARC-Target-URI"), err)
		}
		out = append(out, rec)
	}
	return out, nil
}

func specParse(raw []byte) (specRecord, error) {
	rd := bufio.NewReader(bytes.NewReader(raw))
	line, err := rd.ReadString('\n')
	if err != nil || line != "WARC/1.1\r\n" {
		return specRecord{}, fmt.Errorf("version line %q", line)
	}
	rec := specRecord{fields: map[string]string{}}
	last := ""
	for {
		line, err := rd.ReadString('\n')
		if err != nil || !strings.HasSuffix(line, "\r\n") {
			return rec, errors.New("header line without CRLF")
		}
		line = strings.TrimSuffix(line, "\r\n")
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last == "" {
				return rec, errors.New("continuation before a field")
			}
			rec.fields[last] += " " + strings.TrimSpace(line)
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || name == "" || strings.ContainsAny(name, " \t()<>@,;\\\"/[]?={}") {
			return rec, fmt.Errorf("bad field %q", line)
		}
		last = strings.ToLower(name)
		if _, dup := rec.fields[last]; dup && last != "warc-concurrent-to" {
			return rec, fmt.Errorf("repeated field %s", name)
		}
		rec.fields[last] = strings.TrimSpace(value)
	}
	for _, f := range []string{"WARC-Record-ID", "Content-Length", "WARC-Date", "WARC-Type"} {
		if rec.get(f) == "" {
			return rec, fmt.Errorf("mandatory field %s missing", f)
		}
	}
	n, err := strconv.ParseInt(rec.get("Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return rec, fmt.Errorf("content-length %q", rec.get("Content-Length"))
	}
	rec.block = make([]byte, n)
	if _, err := io.ReadFull(rd, rec.block); err != nil {
		return rec, fmt.Errorf("block shorter than content-length %d: %w", n, err)
	}
	tail, _ := io.ReadAll(rd)
	if string(tail) != "\r\n\r\n" {
		return rec, fmt.Errorf("record ends with %q, want CRLF CRLF right after content-length bytes", tail)
	}
	return rec, nil
}

func specDigest(b []byte) string {
	sum := sha1.Sum(b) // WARC digest
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// specPayload returns the payload of rec's block when the block holds it:
// an HTTP message's entity (after the header's empty line) or a
// resource's whole block; ok false for revisits, metadata, warcinfo.
func specPayload(rec specRecord) (payload []byte, ok bool) {
	switch rec.get("WARC-Type") {
	case "resource":
		return rec.block, true
	case "response", "request":
		if !strings.HasPrefix(rec.get("Content-Type"), "application/http") {
			return nil, false
		}
		i := bytes.Index(rec.block, []byte("\r\n\r\n"))
		if i < 0 {
			return nil, false
		}
		return rec.block[i+4:], true
	}
	return nil, false
}

func specVerify(rec specRecord) error {
	if d := rec.get("WARC-Block-Digest"); d == "" || !strings.EqualFold(d, specDigest(rec.block)) {
		return fmt.Errorf("block digest %q, computed %s", d, specDigest(rec.block))
	}
	if p, ok := specPayload(rec); ok {
		d := rec.get("WARC-Payload-Digest")
		if rec.get("WARC-Type") != "request" && d == "" {
			return errors.New("payload digest missing")
		}
		if d != "" && !strings.EqualFold(d, specDigest(p)) {
			return fmt.Errorf("payload digest %q, computed %s", d, specDigest(p))
		}
	}
	if rec.get("WARC-Type") == "revisit" && rec.get("WARC-Profile") == "" {
		return errors.New("revisit without profile")
	}
	return nil
}
