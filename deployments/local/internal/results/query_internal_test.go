package results

import (
	"bufio"
	"bytes"
	"strconv"
	"testing"
)

func TestTablePrinter(t *testing.T) {
	tests := []struct {
		name  string
		rows  [][]string
		nulls []bool
		want  string
	}{
		{
			name: "aligned, numbers right",
			rows: [][]string{{"h0.test", "200", "x"}, {"a-longer-host.test", "7", "line\nbreak"}},
			want: "" +
				"host                status  note\n" +
				"──────────────────  ──────  ───────────\n" +
				"h0.test                200  x\n" +
				"a-longer-host.test       7  line\\nbreak\n",
		},
		{
			name:  "null",
			rows:  [][]string{{"h", "", ""}},
			nulls: []bool{false, true, false},
			want: "" +
				"host  status  note\n" +
				"────  ──────  ────\n" +
				"h       NULL  \n",
		},
		{
			name: "no rows",
			want: "host  status  note\n────  ──────  ────\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			p := &tablePrinter{w: bufio.NewWriter(&buf), right: []bool{false, true, false}}
			if err := p.header([]string{"host", "status", "note"}); err != nil {
				t.Fatal(err)
			}
			for _, r := range tt.rows {
				nulls := tt.nulls
				if nulls == nil {
					nulls = make([]bool, len(r))
				}
				if err := p.row(r, nulls); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.flush(); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", buf.String(), tt.want)
			}
		})
	}
}

// TestTablePrinterStreams: past tableRows rows the table prints as rows
// come, in the widths measured so far.
func TestTablePrinterStreams(t *testing.T) {
	var buf bytes.Buffer
	p := &tablePrinter{w: bufio.NewWriter(&buf), right: []bool{true}}
	if err := p.header([]string{"n"}); err != nil {
		t.Fatal(err)
	}
	for i := range tableRows + 5 {
		if err := p.row([]string{strconv.Itoa(i)}, []bool{false}); err != nil {
			t.Fatal(err)
		}
		if i == tableRows && len(p.held) != 0 {
			t.Fatalf("%d rows held past tableRows", len(p.held))
		}
	}
	if err := p.flush(); err != nil {
		t.Fatal(err)
	}
	if lines := bytes.Count(buf.Bytes(), []byte("\n")); lines != tableRows+5+2 {
		t.Errorf("%d lines, want %d", lines, tableRows+5+2)
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("1004\n")) {
		t.Errorf("last line: %q", buf.Bytes()[buf.Len()-10:])
	}
}
