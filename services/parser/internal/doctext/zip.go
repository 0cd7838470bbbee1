package doctext

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// archive is an office file's zip, read within the limits: every entry
// opened counts its inflated bytes against MaxDecompressed, whatever its
// header claims.
//
// It lives within one readODF or readOOXML call, whose context it holds for
// budgetReader.Read: an io.Reader, called by archive/zip and encoding/xml,
// takes no context.
type archive struct {
	ctx    context.Context //nolint:containedctx // the reading call's, for budgetReader.Read (an io.Reader takes none)
	zr     *zip.Reader
	files  map[string]*zip.File
	budget int64 // decompressed bytes left
}

var errBudget = errors.New("decompressed size over the limit")

func openArchive(ctx context.Context, body []byte, lim Limits) (*archive, error) {
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		if bytes.HasPrefix(body, []byte("PK\x03\x04")) && !bytes.Contains(body[max(0, len(body)-65557):], []byte("PK\x05\x06")) {
			return nil, errorf(KindTruncated, fmt.Errorf("open zip: %w", err))
		}
		return nil, errorf(KindMalformed, fmt.Errorf("open zip: %w", err))
	}
	if len(zr.File) > lim.MaxEntries {
		return nil, errorf(KindTooLarge, fmt.Errorf("zip has %d entries, limit %d", len(zr.File), lim.MaxEntries))
	}
	a := &archive{ctx: ctx, zr: zr, files: make(map[string]*zip.File, len(zr.File)), budget: lim.MaxDecompressed}
	for _, f := range zr.File {
		name := strings.TrimPrefix(f.Name, "/")
		if _, dup := a.files[name]; !dup {
			a.files[name] = f
		}
	}
	return a, nil
}

// budgetReader counts inflated bytes against the archive's budget and
// checks the deadline as it goes.
type budgetReader struct {
	a *archive
	r io.Reader
}

func (b *budgetReader) Read(p []byte) (int, error) {
	if err := b.a.ctx.Err(); err != nil {
		return 0, errorf(KindTimeout, err)
	}
	if b.a.budget <= 0 {
		return 0, errorf(KindTooLarge, errBudget)
	}
	if int64(len(p)) > b.a.budget+1 {
		p = p[:b.a.budget+1]
	}
	n, err := b.r.Read(p)
	b.a.budget -= int64(n)
	if b.a.budget < 0 {
		return n, errorf(KindTooLarge, errBudget)
	}
	return n, err
}

// open opens an entry; ok is false when there is none.
func (a *archive) open(name string) (io.ReadCloser, bool, error) {
	f, ok := a.files[name]
	if !ok {
		return nil, false, nil
	}
	if f.UncompressedSize64 > uint64(a.budget) {
		return nil, true, errorf(KindTooLarge, fmt.Errorf("entry %s: %w", name, errBudget))
	}
	rc, err := f.Open()
	if err != nil {
		return nil, true, errorf(KindMalformed, fmt.Errorf("open entry %s: %w", name, err))
	}
	return struct {
		io.Reader
		io.Closer
	}{&budgetReader{a: a, r: rc}, rc}, true, nil
}

// decoder returns a streaming XML decoder for an entry (nil when absent).
// encoding/xml expands only the five predefined entities and character
// references: a document type's entities (billion laughs) are an error.
func (a *archive) decoder(name string) (*xml.Decoder, io.Closer, error) {
	rc, ok, err := a.open(name)
	if err != nil || !ok {
		return nil, nil, err
	}
	d := xml.NewDecoder(rc)
	d.CharsetReader = func(_ string, input io.Reader) (io.Reader, error) {
		// Office XML is UTF-8 or UTF-16; anything else is read as is.
		return input, nil
	}
	return d, rc, nil
}

// walk streams an entry's XML, calling fn for every token. A missing entry
// is no error. fn's tokens are only valid during the call.
func (a *archive) walk(name string, fn func(xml.Token) error) error {
	d, c, err := a.decoder(name)
	if err != nil || d == nil {
		return err
	}
	// An entry that was only read: Close releases its decompressor, and
	// the errors Close could report are those its reads already returned.
	defer func() { _ = c.Close() }()
	for {
		tok, err := d.RawToken()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			var de *Error
			if errors.As(err, &de) {
				return err
			}
			return errorf(KindMalformed, fmt.Errorf("read %s: %w", name, err))
		}
		if err := fn(tok); err != nil {
			return err
		}
	}
}

// rel is one relationship of an OOXML part.
type rel struct {
	ID, Type, Target string
	External         bool
}

// rels reads the relationships of part (e.g. word/document.xml →
// word/_rels/document.xml.rels); internal targets are made paths in the
// archive.
func (a *archive) rels(part string) ([]rel, error) {
	dir, file := path.Split(part)
	var out []rel
	err := a.walk(dir+"_rels/"+file+".rels", func(tok xml.Token) error {
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "Relationship" {
			return nil
		}
		r := rel{ID: attr(se, "Id"), Type: attr(se, "Type"), Target: attr(se, "Target")}
		r.External = strings.EqualFold(attr(se, "TargetMode"), "External")
		if !r.External {
			if strings.HasPrefix(r.Target, "/") {
				r.Target = strings.TrimPrefix(r.Target, "/")
			} else {
				r.Target = path.Join(dir, r.Target)
			}
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// attr returns the value of the attribute with the local name.
func attr(se xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// attrNS returns the value of the attribute prefix:local (RawToken leaves
// prefixes in Name.Space).
func attrNS(se xml.StartElement, prefix, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local && a.Name.Space == prefix {
			return a.Value
		}
	}
	return ""
}
