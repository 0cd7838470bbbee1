package exportfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Output is an export's output file. Writes go to a temporary file in the
// path's directory and Commit renames it to the path: an export that fails
// (a crawl without rows, a lost connection, Ctrl-C) leaves no partial file
// behind, and a file already at the path is replaced only by a complete
// export. Not safe for concurrent use.
type Output struct {
	f    *os.File
	path string
	done bool // committed or discarded
}

// CreateOutput checks that path can be written — its directory exists and
// is writable, and path is not a directory — and opens the temporary file.
// The caller must Commit or Close it.
func CreateOutput(path string) (*Output, error) {
	if path == "" {
		return nil, errors.New("output path must not be empty")
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("output path %s is a directory", path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("output path %s: directory %s does not exist", path, dir)
	case err != nil:
		return nil, fmt.Errorf("output path %s: %w", path, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("output path %s: %s is not a directory", path, dir)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.partial")
	if err != nil {
		return nil, fmt.Errorf("output path %s is not writable: %w", path, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("output path %s: %w", path, err), f.Close(), os.Remove(f.Name()))
	}
	return &Output{f: f, path: path}, nil
}

// Write writes to the temporary file.
func (o *Output) Write(p []byte) (int, error) { return o.f.Write(p) }

// Commit closes the temporary file and renames it to the path.
func (o *Output) Commit() error {
	if o.done {
		return errors.New("output already committed or closed")
	}
	o.done = true
	if err := o.f.Close(); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", o.path, err), os.Remove(o.f.Name()))
	}
	if err := os.Rename(o.f.Name(), o.path); err != nil {
		return errors.Join(fmt.Errorf("write %s: %w", o.path, err), os.Remove(o.f.Name()))
	}
	return nil
}

// Close discards the temporary file unless Commit was called; after Commit
// it does nothing, so `defer out.Close()` suits every path.
func (o *Output) Close() error {
	if o.done {
		return nil
	}
	o.done = true
	return errors.Join(o.f.Close(), os.Remove(o.f.Name()))
}
