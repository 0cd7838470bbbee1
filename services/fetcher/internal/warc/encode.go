package warc

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"hash/crc32"
	randv2 "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/flate"
)

// gzipLevel is the DEFLATE level of the records' gzip members
// (klauspost/compress): level 1 takes about half the time of the default
// (6) on 20 KB pages and writes about 7 % more bytes (README). It is the
// fastest level that looks for repeated strings: what is left of its
// time is the matching (about 60 %) and the Huffman coding (about 35 %).
const gzipLevel = 1

// huffmanLevel is the level of Options.HuffmanOnly: Huffman coding of
// the bytes, no search for repeated strings. BenchmarkArchive
// (identity-coded pages of 10-30 KB, 2 shared cores, medians of 5):
// 0.288 -> 0.152 ms of CPU per fetch (-47 %), 8649 -> 12883 bytes on
// disk per fetch (+49 %); pages the server compressed are stored
// either way (0.043 ms, 8317 bytes).
const huffmanLevel = flate.HuffmanOnly

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
	// blockIsPayload: the block is the payload (a resource record's), so
	// its WARC-Block-Digest is payloadDigest, not computed again.
	blockIsPayload bool
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
// need for random access) into out, reusing its buffers, hash and DEFLATE
// writer; it frames the members itself (gzip header, CRC-32 and size) and
// writes stored blocks itself. Not safe for concurrent use (the Writer's,
// under gowarcMu).
type encoder struct {
	out bytes.Buffer // the members of one write
	hdr []byte
	zw  *flate.Writer
	h   hash.Hash
	sum []byte
	rnd *randv2.ChaCha8 // of the record ids, seeded from crypto/rand
}

func newEncoder() *encoder { return newEncoderLevel(gzipLevel) }

// newEncoderLevel returns an encoder compressing at level (gzipLevel or
// huffmanLevel).
func newEncoderLevel(level int) *encoder {
	zw, err := flate.NewWriter(nil, level)
	if err != nil {
		panic(err) // a constant, valid level
	}
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // never fails (crypto/rand)
	return &encoder{zw: zw, h: sha1.New(), rnd: randv2.NewChaCha8(seed)}
}

// digest is the SHA-1 digest of the concatenation of parts, as WARC
// writes it ("sha1:" and base 32).
func (e *encoder) digest(parts ...[]byte) string {
	return string(e.appendDigest(nil, parts...))
}

// appendDigest appends the digest of the concatenation of parts to b.
func (e *encoder) appendDigest(b []byte, parts ...[]byte) []byte {
	e.h.Reset()
	for _, p := range parts {
		e.h.Write(p)
	}
	e.sum = e.h.Sum(e.sum[:0])
	return base32.StdEncoding.AppendEncode(append(b, "sha1:"...), e.sum)
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
	h = append(h, "Content-Length: "...)
	h = strconv.AppendInt(h, int64(size), 10)
	h = append(h, "\r\nWARC-Block-Digest: "...)
	if r.blockIsPayload {
		h = append(h, r.payloadDigest...)
	} else {
		h = e.appendDigest(h, r.parts...)
	}
	h = append(h, "\r\n"...)
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
	e.out.Write(gzipHeader[:])
	crc := crc32.Update(0, crc32.IEEETable, h)
	for _, p := range r.parts {
		crc = crc32.Update(crc, crc32.IEEETable, p)
	}
	crc = crc32.Update(crc, crc32.IEEETable, recordEnd)
	n := len(h) + size + len(recordEnd)
	if r.coded || n < storedBelow {
		e.store(n, h, r.parts, recordEnd)
	} else {
		e.zw.Reset(&e.out)
		if _, err := e.zw.Write(h); err != nil {
			return 0, err
		}
		for _, p := range r.parts {
			if _, err := e.zw.Write(p); err != nil {
				return 0, err
			}
		}
		if _, err := e.zw.Write(recordEnd); err != nil {
			return 0, err
		}
		if err := e.zw.Close(); err != nil {
			return 0, err
		}
	}
	var tr [8]byte
	binary.LittleEndian.PutUint32(tr[:4], crc)
	binary.LittleEndian.PutUint32(tr[4:], uint32(n))
	e.out.Write(tr[:])
	return int64(e.out.Len() - start), nil
}

// gzipHeader starts every member (RFC 1952): DEFLATE, no flags, no
// modification time, no extra flags, operating system unknown (255), as
// klauspost/compress's gzip writer wrote it.
var gzipHeader = [10]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}

// recordEnd ends every record (the two line breaks after its block).
var recordEnd = []byte("\r\n\r\n")

// maxStored is the most bytes a stored DEFLATE block holds (RFC 1951).
const maxStored = 1<<16 - 1

// store appends the n bytes of head, parts and tail to out as stored
// DEFLATE blocks (RFC 1951 3.2.4: a byte of BFINAL and BTYPE 00, LEN and
// its complement, the bytes), the last one final: the bytes are copied
// once, into out, with no window in between.
func (e *encoder) store(n int, head []byte, parts [][]byte, tail []byte) {
	e.out.Grow(n + 5*(n/maxStored+1))
	left := 0 // bytes of the current block still to copy
	put := func(p []byte) {
		for len(p) > 0 {
			if left == 0 {
				left = min(n, maxStored)
				n -= left
				var bh [5]byte
				if n == 0 {
					bh[0] = 1 // BFINAL
				}
				binary.LittleEndian.PutUint16(bh[1:], uint16(left))
				binary.LittleEndian.PutUint16(bh[3:], ^uint16(left))
				e.out.Write(bh[:])
			}
			k := min(left, len(p))
			e.out.Write(p[:k])
			p, left = p[k:], left-k
		}
	}
	if n == 0 {
		e.out.Write([]byte{1, 0, 0, 0xff, 0xff}) // one final empty block
		return
	}
	put(head)
	for _, p := range parts {
		put(p)
	}
	put(tail)
}

// lineBreaks makes line breaks spaces.
var lineBreaks = strings.NewReplacer("\r", " ", "\n", " ")

// hasLineBreak reports whether s holds a CR or LF (strings.IndexByte is
// vectorised, strings.ContainsAny builds a set and loops).
func hasLineBreak(s string) bool {
	return strings.IndexByte(s, '\n') >= 0 || strings.IndexByte(s, '\r') >= 0
}

// appendField appends "name: value\r\n" to h, a line break in value
// (none is expected: URLs, dates, ids) made a space.
func appendField(h []byte, name, value string) []byte {
	h = append(h, name...)
	h = append(h, ": "...)
	if hasLineBreak(value) {
		value = lineBreaks.Replace(value)
	}
	h = append(h, value...)
	return append(h, "\r\n"...)
}
