package results

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"
)

// tableRows is how many rows an aligned table measures before it prints:
// the rest are printed in the same widths (a longer value overflows its
// column), so a large answer never waits in memory.
const tableRows = 1000

// Query runs cfg.SQL in the crawl's database and prints the answer with a
// header row: an aligned table when aligned (standard output is a
// terminal), tab-separated values otherwise (ClickHouse's TSVWithNames:
// tab, line break and backslash escaped, NULL as \N). A query ClickHouse
// refuses is an error carrying ClickHouse's message.
func Query(ctx context.Context, cfg QueryConfig, stdout, stderr io.Writer, aligned bool) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	store, stop, err := open(ctx, cfg.Source, stderr)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	rows, err := store.Conn().Query(ctx, cfg.SQL)
	if err != nil {
		return fmt.Errorf("query: %w", err)
	}
	defer rows.Close()
	types := rows.ColumnTypes()
	if len(types) == 0 { // a statement without an answer (DDL)
		return rows.Err()
	}
	vals := make([]any, len(types))
	right := make([]bool, len(types))
	date := make([]bool, len(types)) // Date, Date32: printed without a time
	for i, ct := range types {
		vals[i] = reflect.New(ct.ScanType()).Interface()
		right[i] = numeric(ct.ScanType())
		name := strings.TrimSuffix(strings.TrimPrefix(ct.DatabaseTypeName(), "Nullable("), ")")
		date[i] = name == "Date" || name == "Date32"
	}
	var p printer = &tsvPrinter{w: bufio.NewWriter(stdout)}
	if aligned {
		p = &tablePrinter{w: bufio.NewWriter(stdout), right: right}
	}
	if err := p.header(rows.Columns()); err != nil {
		return fmt.Errorf("print answer: %w", err)
	}
	n := 0
	cells := make([]string, len(types))
	nulls := make([]bool, len(types))
	for rows.Next() {
		if err := rows.Scan(vals...); err != nil {
			return fmt.Errorf("scan answer: %w", err)
		}
		for i, v := range vals {
			cells[i], nulls[i] = cell(reflect.ValueOf(v).Elem())
			if date[i] {
				cells[i], _, _ = strings.Cut(cells[i], " ")
			}
		}
		if err := p.row(cells, nulls); err != nil {
			return fmt.Errorf("print answer: %w", err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("query: %w", err)
	}
	if err := p.flush(); err != nil {
		return fmt.Errorf("print answer: %w", err)
	}
	if aligned {
		fmt.Fprintf(stderr, "%d rows\n", n)
	}
	return nil
}

// numeric reports a column printed right-aligned.
func numeric(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// cell is a scanned value as text, or null for a NULL.
func cell(v reflect.Value) (string, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "", true
		}
		v = v.Elem()
	}
	return text(v), false
}

// text is a value as ClickHouse prints it: DateTime as 2006-01-02
// 15:04:05, arrays as [1,2] and ['a','b'], NULL inside them as NULL.
func text(v reflect.Value) string {
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "NULL"
		}
		return text(v.Elem())
	}
	switch x := v.Interface().(type) {
	case time.Time:
		if x.Nanosecond() != 0 {
			return x.Format("2006-01-02 15:04:05.999999999")
		}
		return x.Format(time.DateTime)
	case string:
		return x
	case fmt.Stringer:
		return x.String()
	}
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = element(v.Index(i))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case reflect.Map:
		iter := v.MapRange()
		var parts []string
		for iter.Next() {
			parts = append(parts, element(iter.Key())+":"+element(iter.Value()))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// element is a value inside an array or map: strings and times quoted.
func element(v reflect.Value) string {
	s := text(v)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "NULL"
		}
		v = v.Elem()
	}
	if v.Kind() == reflect.String || v.Type() == reflect.TypeFor[time.Time]() {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
	}
	return s
}

// printer prints an answer. Not safe for concurrent use.
type printer interface {
	header(names []string) error
	// row prints cells, cell i NULL when nulls[i]; it does not keep the
	// slices.
	row(cells []string, nulls []bool) error
	flush() error
}

// tsvEscaper escapes a TSV field as ClickHouse's TabSeparated does.
var tsvEscaper = strings.NewReplacer(`\`, `\\`, "\t", `\t`, "\n", `\n`, "\r", `\r`, "\x00", `\0`)

type tsvPrinter struct{ w *bufio.Writer }

func (p *tsvPrinter) header(names []string) error { return p.row(names, make([]bool, len(names))) }

func (p *tsvPrinter) row(cells []string, nulls []bool) error {
	for i, c := range cells {
		if i > 0 {
			_ = p.w.WriteByte('\t') // a bufio.Writer's error is sticky: returned below
		}
		if nulls[i] {
			_, _ = p.w.WriteString(`\N`)
			continue
		}
		_, _ = tsvEscaper.WriteString(p.w, c)
	}
	return p.w.WriteByte('\n')
}

func (p *tsvPrinter) flush() error { return p.w.Flush() }

// displayEscaper keeps a cell on one line of the table.
var displayEscaper = strings.NewReplacer("\n", `\n`, "\t", `\t`, "\r", `\r`)

// tablePrinter prints an aligned table: the first tableRows rows are held
// to measure the columns, the rest printed as they come.
type tablePrinter struct {
	w      *bufio.Writer
	right  []bool
	names  []string
	held   [][]string
	widths []int // nil until measured
}

func (p *tablePrinter) header(names []string) error {
	p.names = names
	return nil
}

func (p *tablePrinter) row(cells []string, nulls []bool) error {
	r := make([]string, len(cells))
	for i, c := range cells {
		if nulls[i] {
			r[i] = "NULL"
			continue
		}
		r[i] = displayEscaper.Replace(c)
	}
	if p.widths != nil {
		return p.line(r)
	}
	p.held = append(p.held, r)
	if len(p.held) < tableRows {
		return nil
	}
	return p.measure()
}

// measure sets the widths from the header and the held rows and prints
// them.
func (p *tablePrinter) measure() error {
	p.widths = make([]int, len(p.names))
	for i, n := range p.names {
		p.widths[i] = utf8.RuneCountInString(n)
	}
	for _, r := range p.held {
		for i, c := range r {
			p.widths[i] = max(p.widths[i], utf8.RuneCountInString(c))
		}
	}
	if err := p.line(p.names); err != nil {
		return err
	}
	rule := make([]string, len(p.widths))
	for i, w := range p.widths {
		rule[i] = strings.Repeat("─", w)
	}
	if err := p.line(rule); err != nil {
		return err
	}
	for _, r := range p.held {
		if err := p.line(r); err != nil {
			return err
		}
	}
	p.held = nil
	return nil
}

func (p *tablePrinter) line(cells []string) error {
	for i, c := range cells {
		if i > 0 {
			_, _ = p.w.WriteString("  ")
		}
		pad := strings.Repeat(" ", max(0, p.widths[i]-utf8.RuneCountInString(c)))
		switch {
		case p.right[i]:
			_, _ = p.w.WriteString(pad + c)
		case i == len(cells)-1:
			_, _ = p.w.WriteString(c) // no trailing blanks
		default:
			_, _ = p.w.WriteString(c + pad)
		}
	}
	return p.w.WriteByte('\n')
}

func (p *tablePrinter) flush() error {
	if p.widths == nil {
		if err := p.measure(); err != nil {
			return err
		}
	}
	return p.w.Flush()
}
