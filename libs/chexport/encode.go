package chexport

import (
	"bufio"
	"encoding/json"
	"io"
	"reflect"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"
)

// encoder writes rows of type T in one format. Not safe for concurrent use.
type encoder[T any] interface {
	// encode writes (or buffers) one row; the encoder does not keep r.
	encode(r *T) error
	// close writes what is buffered and the format's trailer; the
	// underlying writer is not closed.
	close() error
}

// writeBuffer is the buffer between an encoder and the output.
const writeBuffer = 64 << 10

func newEncoder[T any](f Format, def tableDef[T], w io.Writer) encoder[T] {
	switch f {
	case CSV:
		return newCSVEncoder(def, w)
	case Parquet:
		if def.parquet != nil {
			return def.parquet(w)
		}
		return newParquetEncoder[T](w)
	default:
		bw := bufio.NewWriterSize(w, writeBuffer)
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		return &jsonlEncoder[T]{w: bw, enc: enc}
	}
}

// jsonlEncoder writes one JSON object per line, fields in the row type's
// order.
type jsonlEncoder[T any] struct {
	w   *bufio.Writer
	enc *json.Encoder
}

func (e *jsonlEncoder[T]) encode(r *T) error { return e.enc.Encode(r) }
func (e *jsonlEncoder[T]) close() error      { return e.w.Flush() }

// csvEncoder writes RFC 4180 CSV: a header row, records ended by CRLF, a
// field quoted (its quotes doubled) when it holds a comma, a quote, CR or
// LF, or starts with a space. A field's own line breaks are written as
// they are (encoding/csv's UseCRLF would turn each LF inside a field into
// CRLF, changing the text).
type csvEncoder[T any] struct {
	w      *bufio.Writer
	record func(*T, []string) []string
	rec    []string
}

func newCSVEncoder[T any](def tableDef[T], w io.Writer) *csvEncoder[T] {
	e := &csvEncoder[T]{w: bufio.NewWriterSize(w, writeBuffer), record: def.record}
	_ = e.writeRecord(def.columns) // its error is the writer's: sticky, returned by the next write or close
	return e
}

func (e *csvEncoder[T]) encode(r *T) error {
	e.rec = e.record(r, e.rec[:0])
	return e.writeRecord(e.rec)
}

func (e *csvEncoder[T]) writeRecord(fields []string) error {
	for i, f := range fields {
		if i > 0 {
			_ = e.w.WriteByte(',') // a bufio.Writer's error is sticky: the WriteString below returns it
		}
		if !needsQuotes(f) {
			_, _ = e.w.WriteString(f)
			continue
		}
		_ = e.w.WriteByte('"')
		for {
			j := strings.IndexByte(f, '"')
			if j < 0 {
				break
			}
			_, _ = e.w.WriteString(f[:j+1])
			_ = e.w.WriteByte('"')
			f = f[j+1:]
		}
		_, _ = e.w.WriteString(f)
		_ = e.w.WriteByte('"')
	}
	_, err := e.w.WriteString("\r\n")
	return err
}

func needsQuotes(f string) bool {
	return f != "" && (f[0] == ' ' || strings.ContainsAny(f, ",\"\r\n"))
}

func (e *csvEncoder[T]) close() error { return e.w.Flush() }

// Parquet row groups: a group is flushed to the output once it holds
// rowGroupRows rows or about rowGroupBytes bytes of values (before
// encoding and compression), whichever comes first. The writer keeps the
// open group's encoded, compressed pages in memory, so these bound an
// export's memory; a reader wants groups large enough to scan quickly.
const (
	rowGroupRows  = 128 << 10
	rowGroupBytes = 32 << 20
	// parquetBatch rows are handed to the writer at once.
	parquetBatch = 256
)

// parquetEncoder writes a Parquet file whose schema is T's (parquet
// struct tags), Snappy-compressed.
type parquetEncoder[T any] struct {
	w       *parquet.GenericWriter[T]
	size    func(*T) int // approximate bytes of a row's values
	batch   []T
	inGroup int // rows in the open row group
	bytes   int // approximate bytes in the open row group
}

func newParquetEncoder[T any](w io.Writer) *parquetEncoder[T] {
	return &parquetEncoder[T]{
		w: parquet.NewGenericWriter[T](w,
			parquet.Compression(&snappy.Codec{}),
			parquet.WriteBufferSize(writeBuffer),
			parquet.CreatedBy("trawl", "chexport", "")),
		size:  rowSize[T](),
		batch: make([]T, 0, parquetBatch),
	}
}

func (e *parquetEncoder[T]) encode(r *T) error {
	e.batch = append(e.batch, *r)
	e.bytes += e.size(r)
	if len(e.batch) == cap(e.batch) {
		return e.writeBatch()
	}
	return nil
}

func (e *parquetEncoder[T]) writeBatch() error {
	if len(e.batch) == 0 {
		return nil
	}
	if _, err := e.w.Write(e.batch); err != nil {
		return err
	}
	e.inGroup += len(e.batch)
	clear(e.batch) // drop the strings: the writer copied them
	e.batch = e.batch[:0]
	if e.inGroup >= rowGroupRows || e.bytes >= rowGroupBytes {
		e.inGroup, e.bytes = 0, 0
		return e.w.Flush()
	}
	return nil
}

func (e *parquetEncoder[T]) close() error {
	if err := e.writeBatch(); err != nil {
		return err
	}
	return e.w.Close()
}

// rowSize returns a function that estimates the bytes of a row of T's
// values: its strings' lengths and 8 bytes per other field.
func rowSize[T any]() func(*T) int {
	t := reflect.TypeFor[T]()
	var strs []int
	fixed := 0
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() == reflect.String {
			strs = append(strs, i)
		} else {
			fixed += 8
		}
	}
	return func(r *T) int {
		v := reflect.ValueOf(r).Elem()
		n := fixed
		for _, i := range strs {
			n += v.Field(i).Len()
		}
		return n
	}
}
