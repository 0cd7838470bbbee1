package seeds_test

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
	"github.com/trawl-crawler/trawl/services/seeder/internal/seeds"
)

func TestRead(t *testing.T) {
	long := "http://example.com/" + strings.Repeat("a", seeds.MaxLineBytes)
	tests := []struct {
		name      string
		in        string
		want      []seeds.Seed
		wantBad   []int   // line numbers
		wantErrIs []error // per bad line
	}{
		{name: "empty", in: ""},
		{name: "only comments and blanks", in: "# seeds\n\n   \n\t# indented comment\n"},
		{
			name: "lf",
			in:   "http://a.example/\nhttps://B.example:443/x/../y\n",
			want: []seeds.Seed{{Line: 1, URL: "http://a.example/"}, {Line: 2, URL: "https://b.example/y"}},
		},
		{
			name: "crlf and no final newline",
			in:   "http://a.example/\r\n\r\nhttp://b.example/p\r\nhttp://c.example",
			want: []seeds.Seed{{Line: 1, URL: "http://a.example/"}, {Line: 3, URL: "http://b.example/p"}, {Line: 4, URL: "http://c.example/"}},
		},
		{
			name: "bom",
			in:   "\uFEFFhttp://a.example/\n\uFEFFhttp://b.example/\n",
			want: []seeds.Seed{{Line: 1, URL: "http://a.example/"}},
			// A BOM is only a BOM at the start of the file.
			wantBad: []int{2}, wantErrIs: []error{urlcanon.ErrInvalid},
		},
		{
			name: "bom before comment",
			in:   "\uFEFF# comment\nhttp://a.example/",
			want: []seeds.Seed{{Line: 2, URL: "http://a.example/"}},
		},
		{
			name: "surrounding whitespace",
			in:   "  \thttp://a.example/path \t \n",
			want: []seeds.Seed{{Line: 1, URL: "http://a.example/path"}},
		},
		{
			name: "invalid lines reported, valid kept",
			in: "http://ok.example/\nnot a url\nmailto:x@example.com\n# comment\nftp://files.example/pub\n" +
				"javascript:alert(1)\nhttp://\n/relative/path\n",
			want:      []seeds.Seed{{Line: 1, URL: "http://ok.example/"}, {Line: 5, URL: "ftp://files.example/pub"}},
			wantBad:   []int{2, 3, 6, 7, 8},
			wantErrIs: []error{urlcanon.ErrInvalid, urlcanon.ErrScheme, urlcanon.ErrScheme, urlcanon.ErrInvalid, urlcanon.ErrInvalid},
		},
		{
			name:      "very long line does not stop the file",
			in:        "http://a.example/\n" + long + "\nhttp://b.example/\n",
			want:      []seeds.Seed{{Line: 1, URL: "http://a.example/"}, {Line: 3, URL: "http://b.example/"}},
			wantBad:   []int{2},
			wantErrIs: []error{seeds.ErrLineTooLong},
		},
		{
			name:      "very long last line without newline",
			in:        "http://a.example/\n" + long + long,
			want:      []seeds.Seed{{Line: 1, URL: "http://a.example/"}},
			wantBad:   []int{2},
			wantErrIs: []error{seeds.ErrLineTooLong},
		},
		{
			name:      "url too long for urlcanon",
			in:        "http://example.com/" + strings.Repeat("b", urlcanon.MaxLength) + "\n",
			wantBad:   []int{1},
			wantErrIs: []error{urlcanon.ErrTooLong},
		},
		{
			name:      "invalid utf-8",
			in:        "http://example.com/\xff\xfe\nhttp://ok.example/",
			want:      []seeds.Seed{{Line: 2, URL: "http://ok.example/"}},
			wantBad:   []int{1},
			wantErrIs: []error{seeds.ErrInvalidUTF8},
		},
		{
			name: "idn and percent encoding",
			in:   "http://例子.测试/路径\n",
			want: []seeds.Seed{{Line: 1, URL: "http://xn--fsqu00a.xn--0zwm56d/%E8%B7%AF%E5%BE%84"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time exercises the line reassembly.
			got, bad, err := seeds.Read(iotest.OneByteReader(strings.NewReader(tt.in)))
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("seeds = %+v, want %+v", got, tt.want)
			}
			if len(bad) != len(tt.wantBad) {
				t.Fatalf("bad lines = %+v, want lines %v", bad, tt.wantBad)
			}
			for i, b := range bad {
				if b.Line != tt.wantBad[i] || !errors.Is(b, tt.wantErrIs[i]) {
					t.Errorf("bad[%d] = line %d %v, want line %d %v", i, b.Line, b.Err, tt.wantBad[i], tt.wantErrIs[i])
				}
				if len(b.Raw) > 200 || !utf8.ValidString(b.Raw) {
					t.Errorf("bad[%d].Raw not capped valid UTF-8: %d bytes", i, len(b.Raw))
				}
			}
		})
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("http://a.example/\nhttp://b.exa"), iotest.ErrReader(boom))
	got, _, err := seeds.Read(r)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if len(got) != 1 {
		t.Errorf("seeds before the error = %+v, want 1", got)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		raw     string
		want    string
		wantErr error
	}{
		{raw: " HTTP://Example.COM:80/a/./b ", want: "http://example.com/a/b"},
		{raw: "", wantErr: seeds.ErrEmpty},
		{raw: "  ", wantErr: seeds.ErrEmpty},
		{raw: "data:text/plain,x", wantErr: urlcanon.ErrScheme},
		{raw: "\xff", wantErr: seeds.ErrInvalidUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, err := seeds.Parse(tt.raw)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("Parse(%q) = %q, %v; want %q, %v", tt.raw, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// FuzzRead feeds arbitrary files to Read. Invariants: it never panics nor
// fails on an in-memory reader; every seed is canonical and every line
// number is accounted for at most once, in increasing order, within the
// file's line count; reported raw text is valid UTF-8 of at most 200 bytes.
func FuzzRead(f *testing.F) {
	f.Add("http://a.example/\r\n# c\n\nbad\n")
	f.Add("\uFEFFhttps://例子.测试/\nmailto:x\n")
	f.Add(strings.Repeat("x", 70000) + "\nhttp://b/")
	f.Fuzz(func(t *testing.T, in string) {
		got, bad, err := seeds.Read(strings.NewReader(in))
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		lines := strings.Count(in, "\n") + 1
		seen := make(map[int]bool)
		for _, s := range got {
			if c, err := urlcanon.Canonicalize(s.URL); err != nil || c != s.URL {
				t.Errorf("seed %q not canonical: %q %v", s.URL, c, err)
			}
			if s.Line < 1 || s.Line > lines || seen[s.Line] {
				t.Errorf("seed line %d out of range or repeated", s.Line)
			}
			seen[s.Line] = true
		}
		for _, b := range bad {
			if b.Line < 1 || b.Line > lines || seen[b.Line] {
				t.Errorf("bad line %d out of range or repeated", b.Line)
			}
			seen[b.Line] = true
			if len(b.Raw) > 200 || !utf8.ValidString(b.Raw) || b.Err == nil {
				t.Errorf("bad line %d: raw %d bytes, err %v", b.Line, len(b.Raw), b.Err)
			}
		}
	})
}
