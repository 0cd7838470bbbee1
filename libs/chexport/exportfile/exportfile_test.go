package exportfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/libs/chexport/exportfile"
)

// TestOutput: an output file appears only complete; a path that cannot be
// written is an error naming it.
func TestOutput(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name, path, want string
	}{
		{"missing directory", filepath.Join(dir, "nope", "out.csv"), "does not exist"},
		{"parent is a file", filepath.Join(notDir, "out.csv"), "is not a directory"},
		{"path is a directory", dir, "is a directory"},
		{"empty", "", "must not be empty"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := exportfile.CreateOutput(tt.path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("CreateOutput(%q) = %v, want an error naming the path and saying %q", tt.path, err, tt.want)
			}
		})
	}
	t.Run("discarded", func(t *testing.T) {
		path := filepath.Join(dir, "keep.csv")
		if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exportfile.CreateOutput(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := out.Write([]byte("partial")); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != "old" {
			t.Errorf("file after a discarded export: %q, want the old content", b)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 2 {
			t.Errorf("directory holds %d entries, want the 2 it had (no temporary file left)", len(entries))
		}
	})
	t.Run("committed", func(t *testing.T) {
		path := filepath.Join(dir, "new.csv")
		out, err := exportfile.CreateOutput(path)
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("file exists before commit: %v", err)
		}
		if _, err := out.Write([]byte("done")); err != nil {
			t.Fatal(err)
		}
		if err := out.Commit(); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != "done" {
			t.Errorf("committed file: %q", b)
		}
	})
}

func TestParse(t *testing.T) {
	tests := []struct {
		table, format string
		wantT         exportfile.Table
		wantF         exportfile.Format
		err           error
	}{
		{"", "", exportfile.Documents, exportfile.JSONL, nil},
		{"links", "parquet", exportfile.Links, exportfile.Parquet, nil},
		{"pages", "csv", "", exportfile.CSV, exportfile.ErrUnknownTable},
		{"fetch_log", "CSV", exportfile.FetchLog, "", exportfile.ErrUnknownFormat},
	}
	for _, tt := range tests {
		tb, terr := exportfile.ParseTable(tt.table)
		f, ferr := exportfile.ParseFormat(tt.format)
		if err := errors.Join(terr, ferr); !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
			t.Errorf("Parse(%q, %q): error %v, want %v", tt.table, tt.format, err, tt.err)
		}
		if tb != tt.wantT || f != tt.wantF {
			t.Errorf("Parse(%q, %q) = %q, %q; want %q, %q", tt.table, tt.format, tb, f, tt.wantT, tt.wantF)
		}
	}
	if got := exportfile.FileName("c1", exportfile.FetchLog, exportfile.Parquet); got != "c1-fetch_log.parquet" {
		t.Errorf("FileName = %q", got)
	}
	for f, want := range map[exportfile.Format]string{exportfile.JSONL: "application/x-ndjson",
		exportfile.CSV: "text/csv; charset=utf-8; header=present", exportfile.Parquet: "application/vnd.apache.parquet"} {
		if got := f.ContentType(); got != want {
			t.Errorf("%s: ContentType %q, want %q", f, got, want)
		}
	}
}
