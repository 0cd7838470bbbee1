package doctext

import (
	"context"
	"encoding/xml"
	"errors"
	"strconv"
	"strings"
)

// readODF reads an odt, ods or odp: meta.xml for the properties,
// content.xml for the text.
func readODF(ctx context.Context, format string, body []byte, out *collector) error {
	a, err := openArchive(ctx, body, out.lim)
	if err != nil {
		return err
	}
	if err := a.odfEncrypted(); err != nil {
		return err
	}
	if err := a.odfMeta(out); err != nil {
		return err
	}
	if _, ok := a.files["content.xml"]; !ok {
		return errorf(KindMalformed, errNoContent)
	}
	return a.odfContent(format, out)
}

var errNoContent = errors.New("odf file has no content.xml")

// odfEncrypted reports kind encrypted when the manifest says content.xml
// is encrypted (a password-protected ODF file).
func (a *archive) odfEncrypted() error {
	var encrypted bool
	var path string
	err := a.walk("META-INF/manifest.xml", func(tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "file-entry":
				path = attr(t, "full-path")
			case "encryption-data":
				if path == "content.xml" {
					encrypted = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if encrypted {
		return errorf(KindEncrypted, errors.New("odf content is encrypted"))
	}
	return nil
}

func (a *archive) odfMeta(out *collector) error {
	var cur string
	var buf strings.Builder
	pr := &out.props
	return a.walk("meta.xml", func(tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			cur = t.Name.Space + ":" + t.Name.Local
			buf.Reset()
			if t.Name.Local == "document-statistic" {
				if n, err := strconv.Atoi(attr(t, "page-count")); err == nil && n > 0 {
					pr.Pages = n
				}
			}
		case xml.CharData:
			if cur != "" && buf.Len() < 4096 {
				buf.Write(t)
			}
		case xml.EndElement:
			v := strings.TrimSpace(buf.String())
			switch t.Name.Local {
			case "title":
				out.title = v
			case "initial-creator":
				pr.Author = v
			case "creator":
				// dc:creator is who saved it last: the author only when
				// there is no initial creator.
				if pr.Author == "" {
					pr.Author = v
				}
			case "subject":
				pr.Subject = v
			case "keyword":
				if pr.Keywords != "" {
					pr.Keywords += ", "
				}
				pr.Keywords += v
			case "creation-date":
				pr.Created = parseISODate(v)
			case "date":
				pr.Modified = parseISODate(v)
			case "generator":
				pr.Creator = v
			}
			cur = ""
			buf.Reset()
		}
		return nil
	})
}

// odfContent streams content.xml: paragraphs and headings end lines, table
// cells are tab-separated, draw pages (slides) and tables (sheets) end
// pages.
func (a *archive) odfContent(format string, out *collector) error {
	pages, sheets := 0, 0
	cells, inCell, cellParas := 0, 0, 0
	inBody, skip := false, 0
	err := a.walkText("content.xml", out, func(tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "body":
				inBody = true
			case "s":
				if skip == 0 && t.Name.Space == "text" {
					n, err := strconv.Atoi(attr(t, "c"))
					if err != nil || n < 1 {
						n = 1
					}
					out.write(strings.Repeat(" ", min(n, 64)))
				}
			case "tab":
				if skip == 0 && t.Name.Space == "text" {
					out.write("\t")
				}
			case "line-break":
				if skip == 0 {
					out.write("\n")
				}
			case "a":
				out.link(attrNS(t, "xlink", "href"))
			case "table-cell", "covered-table-cell":
				// Cells of a row are separated by tabs, a cell's
				// paragraphs by spaces.
				if cells > 0 {
					out.write("\t")
				}
				cells++
				inCell++
				cellParas = 0
			case "p", "h":
				if inCell > 0 && t.Name.Space == "text" {
					if cellParas > 0 {
						out.write(" ")
					}
					cellParas++
				}
			case "table-row":
				cells = 0
			case "page":
				if t.Name.Space == "draw" {
					pages++
					if pages > out.lim.MaxPages {
						out.trunc = true
						return errFull
					}
				}
			case "table":
				if t.Name.Space == "table" && format == FormatODS {
					sheets++
					if sheets > out.lim.MaxPages {
						out.trunc = true
						return errFull
					}
					if name := attrNS(t, "table", "name"); name != "" {
						out.write(name)
						out.endBlock()
					}
				}
			case "notes", "annotation", "tracked-changes":
				// Speaker notes, comments and deleted text are not the text.
				skip++
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "p", "h":
				if inCell == 0 && skip == 0 {
					out.endBlock()
				}
			case "table-cell", "covered-table-cell":
				inCell--
			case "table-row":
				out.endBlock()
				cells = 0
			case "page":
				if t.Name.Space == "draw" {
					out.endPage()
				}
			case "table":
				if t.Name.Space == "table" && format == FormatODS {
					out.endPage()
				}
			case "notes", "annotation", "tracked-changes":
				skip--
			}
		case xml.CharData:
			if inBody && skip == 0 {
				out.write(string(t))
			}
		}
		return nil
	})
	switch format {
	case FormatODP:
		if out.props.Pages == 0 {
			out.props.Pages = pages
		}
	case FormatODS:
		out.props.Pages = sheets
	}
	return err
}
