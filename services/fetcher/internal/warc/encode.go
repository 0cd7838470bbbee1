package warc

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"hash"
	randv2 "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
)

// gzipLevel is the DEFLATE level of the records' gzip members
// (klauspost/compress): level 1 takes about half the time of the default
// (6) on 20 KB pages and writes about 7 % more bytes (README).
const gzipLevel = 1

// storedBelow: a record smaller than this (a request, a metadata record,
// most revisits: 500-1000 bytes) is stored in its gzip member, not
// compressed: building DEFLATE's Huffman tables costs about as much for
// 700 bytes as for a 20 KB page (about 40 % of the compression time of a
// fetch), and compresses them to about half (about 6 % more bytes per
// fetch in all).
const storedBelow = 2 << 10

// record is a WARC/1.1 record to write. The encoder writes its header
// (WARC-Type, WARC-Target-URI, WARC-Date, WARC-Record-ID, Content-Type,
// Content-Length, WARC-Block-Digest, WARC-Payload-Digest, then fields,
// WARC-Concurrent-To and WARC-Warcinfo-ID) and its block, the
// concatenation of parts, without copying them.
type record struct {
	typ, uri, date, id, contentType string
	fields                          []field
	parts                           [][]byte
	// payloadDigest is the WARC-Payload-Digest ("" for none): of the
	// HTTP payload of a request or response, of the payload a revisit
	// stands for, of a resource's block.
	payloadDigest string
	// coded: the block is mostly a payload compressed by the server,
	// which DEFLATE cannot shrink: stored in its member.
	coded bool
}

// field is a WARC header field.
type field struct{ name, value string }

// get returns the value of the field name of r ("" when it has none).
func (r *record) get(name string) string {
	for _, f := range r.fields {
		if f.name == name {
			return f.value
		}
	}
	return ""
}

// warcDate is the WARC-Date of t (UTC, with its nanoseconds, as gowarc
// writes it).
func warcDate(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// emptyDigest is the SHA-1 digest of no bytes: the payload digest of a
// request without a body.
const emptyDigest = "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"

// encoder writes records as gzip members (one per record, as WARC readers
// need for random access) into out, reusing its buffers, hash and gzip
// writer. Not safe for concurrent use (the Writer's, under gowarcMu).
type encoder struct {
	out bytes.Buffer // the members of one write
	hdr []byte
	zw  *gzip.Writer
	zs  *gzip.Writer // stored (level 0), for small records
	h   hash.Hash
	sum []byte
	rnd *randv2.ChaCha8 // of the record ids, seeded from crypto/rand
}

func newEncoder() *encoder {
	zw, err := gzip.NewWriterLevel(nil, gzipLevel)
	if err != nil {
		panic(err) // a constant, valid level
	}
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // never fails (crypto/rand)
	zs, _ := gzip.NewWriterLevel(nil, gzip.NoCompression)
	return &encoder{zw: zw, zs: zs, h: sha1.New(), rnd: randv2.NewChaCha8(seed)}
}

// digest is the SHA-1 digest of the concatenation of parts, as WARC
// writes it ("sha1:" and base 32).
func (e *encoder) digest(parts ...[]byte) string {
	e.h.Reset()
	for _, p := range parts {
		e.h.Write(p)
	}
	e.sum = e.h.Sum(e.sum[:0])
	return "sha1:" + base32.StdEncoding.EncodeToString(e.sum)
}

// newID is a new WARC-Record-ID: a random (version 4) UUID URN.
func (e *encoder) newID() string {
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], e.rnd.Uint64())
	binary.LittleEndian.PutUint64(u[8:], e.rnd.Uint64())
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	var b [47]byte
	copy(b[:], "<urn:uuid:")
	hex.Encode(b[10:18], u[0:4])
	b[18] = '-'
	hex.Encode(b[19:23], u[4:6])
	b[23] = '-'
	hex.Encode(b[24:28], u[6:8])
	b[28] = '-'
	hex.Encode(b[29:33], u[8:10])
	b[33] = '-'
	hex.Encode(b[34:46], u[10:16])
	b[46] = '>'
	return string(b[:])
}

// member appends r to out as one gzip member, with WARC-Concurrent-To
// each id of concurrent but its own and WARC-Warcinfo-ID warcinfo (when
// not ""), and returns the member's length.
func (e *encoder) member(r *record, concurrent []string, warcinfo string) (int64, error) {
	var size int
	for _, p := range r.parts {
		size += len(p)
	}
	h := append(e.hdr[:0], "WARC/1.1\r\n"...)
	h = appendField(h, "WARC-Type", r.typ)
	if r.uri != "" {
		h = appendField(h, "WARC-Target-URI", r.uri)
	}
	h = appendField(h, "WARC-Date", r.date)
	h = appendField(h, "WARC-Record-ID", r.id)
	h = appendField(h, "Content-Type", r.contentType)
	h = appendField(h, "Content-Length", strconv.Itoa(size))
	h = appendField(h, "WARC-Block-Digest", e.digest(r.parts...))
	if r.payloadDigest != "" {
		h = appendField(h, "WARC-Payload-Digest", r.payloadDigest)
	}
	for _, f := range r.fields {
		h = appendField(h, f.name, f.value)
	}
	for _, id := range concurrent {
		if id != r.id {
			h = appendField(h, "WARC-Concurrent-To", id)
		}
	}
	if warcinfo != "" {
		h = appendField(h, "WARC-Warcinfo-ID", warcinfo)
	}
	h = append(h, "\r\n"...)
	e.hdr = h
	start := e.out.Len()
	zw := e.zw
	if r.coded || len(h)+size < storedBelow {
		zw = e.zs
	}
	zw.Reset(&e.out)
	if _, err := zw.Write(h); err != nil {
		return 0, err
	}
	for _, p := range r.parts {
		if _, err := zw.Write(p); err != nil {
			return 0, err
		}
	}
	if _, err := zw.Write([]byte("\r\n\r\n")); err != nil {
		return 0, err
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return int64(e.out.Len() - start), nil
}

// lineBreaks makes line breaks spaces.
var lineBreaks = strings.NewReplacer("\r", " ", "\n", " ")

// appendField appends "name: value\r\n" to h, a line break in value
// (none is expected: URLs, dates, ids) made a space.
func appendField(h []byte, name, value string) []byte {
	h = append(h, name...)
	h = append(h, ": "...)
	if strings.ContainsAny(value, "\r\n") {
		value = lineBreaks.Replace(value)
	}
	h = append(h, value...)
	return append(h, "\r\n"...)
}
