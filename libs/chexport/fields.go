package chexport

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/encoding"
)

// A document's extracted fields (documents.fields, one JSON object keyed
// by field name) are, in CSV and Parquet, a column per field name,
// fields.NAME, after the other columns, in the order of the names' bytes:
// the names found in the documents the export writes. They are found by a
// first pass over the same documents (own and carried over, each page in
// its latest version) that reads only url_fp, fetched_at and fields, and
// of the crawl's own documents only those with fields: the server reads
// one small column, and Go keeps one entry per field name. A field's CSV
// value is its text: a string as it is, a number as JSON writes it, a list
// as its JSON array, "" when the page has no value. In Parquet a field
// whose every value is a JSON number is an optional DOUBLE, any other an
// optional STRING (of the same text as CSV's), null when the page has no
// value. JSON lines need no first pass: fields is the object itself.
//
// An export taken while the crawl stores documents writes the columns of
// the documents stored when its first pass read them: a field first seen
// after that is left out of CSV and Parquet (not of JSON lines), and a
// number column's value that is not a number is null.

// maxFieldColumns bounds the field names of an export: the names come from
// the crawl's extraction rules, a few dozen at most; more means the column
// holds something else, and the export fails rather than write a file of
// that many columns.
const maxFieldColumns = 1000

// fieldPrefix starts the name of a field's column.
const fieldPrefix = "fields."

// fieldSet is the field columns of one export.
type fieldSet struct {
	names  []string       // in the order of their bytes
	index  map[string]int // name → its place in names
	number []bool         // every value a JSON number: DOUBLE in Parquet
}

// fieldScan is the first pass's encoder: it writes nothing and collects
// the field names of the documents, and whether every value of each is a
// number.
type fieldScan struct {
	number map[string]bool
	err    error
	add    func(name, raw string) // s.addField, made once
}

func newFieldScan() *fieldScan {
	s := &fieldScan{number: make(map[string]bool)}
	s.add = s.addField
	return s
}

func (s *fieldScan) encode(r *DocumentRow) error {
	eachField(string(r.Fields), s.add)
	return s.err
}

func (s *fieldScan) addField(name, raw string) {
	num := isNumber(raw)
	was, ok := s.number[name]
	switch {
	case !ok:
		if len(s.number) == maxFieldColumns {
			s.err = fmt.Errorf("the documents hold more than %d field names: export them as %s", maxFieldColumns, JSONL)
			return
		}
		s.number[strings.Clone(name)] = num // not a substring pinning the row
	case was && !num:
		s.number[name] = false
	}
}

func (s *fieldScan) close() error { return s.err }

// fields is the set the scan found.
func (s *fieldScan) fields() *fieldSet {
	fs := &fieldSet{index: make(map[string]int, len(s.number))}
	for name := range s.number {
		fs.names = append(fs.names, name)
	}
	slices.Sort(fs.names)
	for i, name := range fs.names {
		fs.index[name] = i
		fs.number = append(fs.number, s.number[name])
	}
	return fs
}

// fieldReader reads a document's values of a fieldSet's fields. Not safe
// for concurrent use.
type fieldReader struct {
	fs   *fieldSet
	vals []string // raw JSON of each field, "" when the page has none
	set  func(name, raw string)
}

func (fs *fieldSet) reader() *fieldReader {
	rd := &fieldReader{fs: fs, vals: make([]string, len(fs.names))}
	rd.set = func(name, raw string) {
		if i, ok := fs.index[name]; ok {
			rd.vals[i] = raw
		}
	}
	return rd
}

// read returns the raw values of fields, in the set's order; the slice is
// reused by the next read.
func (rd *fieldReader) read(fields JSONObject) []string {
	clear(rd.vals)
	eachField(string(fields), rd.set)
	return rd.vals
}

// documentsDef is the documents table of an export whose field columns
// are fs (CSV and Parquet).
func documentsDef(fs *fieldSet) tableDef[DocumentRow] {
	def := documentsTable
	def.columns = slices.Clone(documentsTable.columns)
	for _, name := range fs.names {
		def.columns = append(def.columns, fieldPrefix+name)
	}
	rd := fs.reader()
	def.record = func(r *DocumentRow, rec []string) []string {
		rec = documentsTable.record(r, rec)
		for _, raw := range rd.read(r.Fields) {
			rec = append(rec, fieldText(raw))
		}
		return rec
	}
	def.parquet = func(w io.Writer) encoder[DocumentRow] { return newDocumentParquetEncoder(w, fs) }
	return def
}

// documentFieldsTable is what the first pass reads of a document.
var documentFieldsTable = tableDef[DocumentRow]{
	name:    Documents,
	selects: []string{"url_fp", "fetched_at", "fields"},
	scan: func(rows driver.Rows, r *DocumentRow) error {
		var fields string
		err := rows.Scan(&r.URLFP, &r.FetchedAt, &fields)
		r.Fields = JSONObject(fields)
		return err
	},
}

// fieldText is a field's raw JSON value as CSV writes it: a string
// unquoted, anything else (a number, a list) as it is.
func fieldText(raw string) string {
	if raw == "" || raw[0] != '"' {
		return raw
	}
	if !strings.Contains(raw, `\`) {
		return raw[1 : len(raw)-1]
	}
	var s string
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return raw
	}
	return s
}

func isNumber(raw string) bool {
	return raw != "" && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9')
}

// eachField calls fn with the name and the raw JSON value of each member
// of the JSON object obj, in order (a name met twice, twice); it calls it
// for none when obj is not a valid JSON object ("" included). The raw
// values are substrings of obj.
func eachField(obj string, fn func(name, raw string)) {
	if obj == "" || !json.Valid(unsafe.Slice(unsafe.StringData(obj), len(obj))) {
		return
	}
	i := skipSpace(obj, 0)
	if obj[i] != '{' {
		return
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		end := endString(obj, i)
		name := fieldText(obj[i:end])
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // past ':'
		end = endValue(obj, i)
		fn(name, obj[i:end])
		i = skipSpace(obj, end)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// endString is the end of the JSON string starting at s[i] (a quote), past
// its closing quote.
func endString(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(s)
}

// endValue is the end of the JSON value starting at s[i].
func endValue(s string, i int) int {
	switch s[i] {
	case '"':
		return endString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				j = endString(s, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(s)
	}
	j := i
	for j < len(s) && !strings.ContainsRune(",}] \t\r\n", rune(s[j])) {
		j++
	}
	return j
}

// documentParquetEncoder writes documents to Parquet: DocumentRow's
// columns (its parquet tags), then a column per field of the export's
// fieldSet. Its row groups are bounded as parquetEncoder's.
type documentParquetEncoder struct {
	w       *parquet.GenericWriter[any]
	static  *parquet.Schema // DocumentRow's
	nstatic int             // its columns: the first field column's index
	fs      *fieldSet
	rd      *fieldReader
	size    func(*DocumentRow) int
	rows    []parquet.Row // of which n hold a batch
	n       int
	inGroup int
	bytes   int
}

func newDocumentParquetEncoder(w io.Writer, fs *fieldSet) *documentParquetEncoder {
	static := parquet.SchemaOf(DocumentRow{})
	root := documentsNode(slices.Clone(static.Fields()))
	for i, name := range fs.names {
		leaf := parquet.String()
		if fs.number[i] {
			leaf = parquet.Leaf(parquet.DoubleType)
		}
		root = append(root, namedField{Node: parquet.Optional(leaf), name: fieldPrefix + name})
	}
	return &documentParquetEncoder{
		w: parquet.NewGenericWriter[any](w, parquet.NewSchema("documents", root),
			parquet.Compression(&snappy.Codec{}),
			parquet.WriteBufferSize(writeBuffer),
			parquet.CreatedBy("trawl", "chexport", "")),
		static:  static,
		nstatic: len(static.Columns()),
		fs:      fs,
		rd:      fs.reader(),
		size:    rowSize[DocumentRow](),
		rows:    make([]parquet.Row, parquetBatch),
	}
}

func (e *documentParquetEncoder) encode(r *DocumentRow) error {
	row := e.static.Deconstruct(e.rows[e.n][:0], r)
	for i, raw := range e.rd.read(r.Fields) {
		col := e.nstatic + i
		var v parquet.Value // null
		switch {
		case raw == "":
		case e.fs.number[i]:
			if f, err := strconv.ParseFloat(raw, 64); err == nil {
				v = parquet.DoubleValue(f).Level(0, 1, col)
			}
		default:
			v = parquet.ByteArrayValue([]byte(fieldText(raw))).Level(0, 1, col)
		}
		if v.IsNull() {
			v = v.Level(0, 0, col)
		}
		row = append(row, v)
	}
	e.rows[e.n] = row
	e.n++
	e.bytes += e.size(r)
	if e.n == len(e.rows) {
		return e.writeBatch()
	}
	return nil
}

func (e *documentParquetEncoder) writeBatch() error {
	if e.n == 0 {
		return nil
	}
	if _, err := e.w.WriteRows(e.rows[:e.n]); err != nil {
		return err
	}
	e.inGroup += e.n
	for i := range e.n {
		clear(e.rows[i]) // drop the strings: the writer copied them
	}
	e.n = 0
	if e.inGroup >= rowGroupRows || e.bytes >= rowGroupBytes {
		e.inGroup, e.bytes = 0, 0
		return e.w.Flush()
	}
	return nil
}

func (e *documentParquetEncoder) close() error {
	if err := e.writeBatch(); err != nil {
		return err
	}
	return e.w.Close()
}

// documentsNode is the root of a documents Parquet schema: its fields in
// the order given (a parquet.Group orders them by name).
type documentsNode []parquet.Field

func (n documentsNode) ID() int                     { return 0 }
func (n documentsNode) String() string              { return n.group().String() }
func (n documentsNode) Type() parquet.Type          { return parquet.Group{}.Type() }
func (n documentsNode) Optional() bool              { return false }
func (n documentsNode) Repeated() bool              { return false }
func (n documentsNode) Required() bool              { return true }
func (n documentsNode) Leaf() bool                  { return false }
func (n documentsNode) Fields() []parquet.Field     { return n }
func (n documentsNode) Encoding() encoding.Encoding { return nil }
func (n documentsNode) Compression() compress.Codec { return nil }
func (n documentsNode) GoType() reflect.Type        { return n.group().GoType() }

// group is the node as a parquet.Group (its fields by name; a comma, which
// a Go struct tag cannot hold, replaced).
func (n documentsNode) group() parquet.Group {
	g := make(parquet.Group, len(n))
	for _, f := range n {
		g[strings.ReplaceAll(f.Name(), ",", "_")] = f
	}
	return g
}

// namedField is a field column of documentsNode.
type namedField struct {
	parquet.Node
	name string
}

func (f namedField) Name() string { return f.name }

// Value is not used: rows are written as parquet.Row values.
func (f namedField) Value(base reflect.Value) reflect.Value {
	if base.Kind() == reflect.Map {
		return base.MapIndex(reflect.ValueOf(f.name))
	}
	return reflect.Value{}
}
