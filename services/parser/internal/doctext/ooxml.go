package doctext

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// readOOXML reads a docx, xlsx or pptx.
func readOOXML(ctx context.Context, format string, body []byte, out *collector) error {
	if bytes.HasPrefix(body, cfbMagic) {
		// A password-protected OOXML file is an OLE compound file holding
		// the encrypted package; any other compound file is a legacy
		// binary format (doc, xls, ppt).
		if bytes.Contains(body, utf16le("EncryptedPackage")) {
			return errorf(KindEncrypted, errors.New("ooxml file is encrypted"))
		}
		return errorf(KindUnsupported, errors.New("legacy binary office file"))
	}
	a, err := openArchive(ctx, body, out.lim)
	if err != nil {
		return err
	}
	if err := a.coreProps(out); err != nil {
		return err
	}
	switch format {
	case FormatDOCX:
		return a.docx(out)
	case FormatXLSX:
		return a.xlsx(out)
	default:
		return a.pptx(out)
	}
}

// cfbMagic starts an OLE compound file.
var cfbMagic = []byte{0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1}

// utf16le encodes an ASCII string as UTF-16LE, as compound files name
// their streams.
func utf16le(s string) []byte {
	b := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		b = append(b, s[i], 0)
	}
	return b
}

// coreProps reads docProps/core.xml (title, author, dates) and
// docProps/app.xml (pages, application).
func (a *archive) coreProps(out *collector) error {
	var cur string
	var buf strings.Builder
	pr := &out.props
	set := func(name, v string) {
		v = strings.TrimSpace(v)
		switch name {
		case "title":
			out.title = v
		case "creator":
			pr.Author = v
		case "subject":
			pr.Subject = v
		case "keywords":
			pr.Keywords = v
		case "created":
			pr.Created = parseISODate(v)
		case "modified":
			pr.Modified = parseISODate(v)
		case "Pages", "Slides":
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				pr.Pages = n
			}
		case "Application":
			pr.Creator = v
		}
	}
	fn := func(tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			cur = t.Name.Local
			buf.Reset()
		case xml.CharData:
			if cur != "" && buf.Len() < 4096 {
				buf.Write(t)
			}
		case xml.EndElement:
			if t.Name.Local == cur {
				set(cur, buf.String())
			}
			cur = ""
		}
		return nil
	}
	if err := a.walk("docProps/core.xml", fn); err != nil {
		return err
	}
	return a.walk("docProps/app.xml", fn)
}

// mainPart finds the target of the package's relationship of the given type
// suffix (officeDocument), falling back to def.
func (a *archive) mainPart(def string) (string, error) {
	rs, err := a.rels("")
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		if strings.HasSuffix(r.Type, "/officeDocument") && !r.External {
			return r.Target, nil
		}
	}
	return def, nil
}

// hyperlinks adds the external hyperlinks among rels, in their order.
func hyperlinks(out *collector, rs []rel) {
	for _, r := range rs {
		if r.External && strings.HasSuffix(r.Type, "/hyperlink") {
			out.link(r.Target)
		}
	}
}

// docxNotes are the parts of a docx read after its body, in this order,
// by the end of their relationship type: its footnotes and endnotes, then
// its headers and footers (each part once, however many sections name it).
var docxNotes = []string{"/footnotes", "/endnotes", "/header", "/footer"}

func (a *archive) docx(out *collector) error {
	part, err := a.mainPart("word/document.xml")
	if err != nil {
		return err
	}
	rs, err := a.rels(part)
	if err != nil {
		return err
	}
	if err := a.docxPart(part, rs, out); err != nil || out.full {
		return err
	}
	seen := map[string]bool{}
	for _, kind := range docxNotes {
		for _, r := range rs {
			if r.External || !strings.HasSuffix(r.Type, kind) || seen[r.Target] {
				continue
			}
			seen[r.Target] = true
			prs, err := a.rels(r.Target) // the part's own hyperlinks
			if err != nil {
				return err
			}
			if err := a.docxPart(r.Target, prs, out); err != nil || out.full {
				return err
			}
		}
	}
	return nil
}

// docxPart reads the text of one WordprocessingML part (the body, notes,
// a header or a footer); rs are its relationships (its hyperlinks).
func (a *archive) docxPart(part string, rs []rel, out *collector) error {
	links := map[string]string{}
	for _, r := range rs {
		if r.External && strings.HasSuffix(r.Type, "/hyperlink") {
			links[r.ID] = r.Target
		}
	}
	inText, skip, tabs := false, 0, 0
	cells, inCell, cellParas := 0, 0, 0
	return a.walkText(part, out, func(tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "t":
				inText = true
			case "tab":
				// w:tab in a run is a tab; in w:tabs it is a tab stop.
				if skip == 0 && tabs == 0 {
					out.write("\t")
				}
			case "tabs":
				tabs++
			case "br", "cr":
				out.write("\n")
			case "tr":
				cells = 0
			case "tc":
				// Cells of a row are separated by tabs, a cell's
				// paragraphs by spaces.
				if cells > 0 {
					out.write("\t")
				}
				cells++
				inCell++
				cellParas = 0
			case "p":
				if inCell > 0 {
					if cellParas > 0 {
						out.write(" ")
					}
					cellParas++
				}
			case "hyperlink":
				if id := attrNS(t, "r", "id"); id != "" {
					if u, ok := links[id]; ok {
						out.link(u)
					}
				}
			case "delText", "instrText", "del", "Fallback":
				// Deleted text, field codes, and the copy of a text box
				// for readers that do not know its drawing.
				skip++
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "t":
				inText = false
			case "p":
				if inCell == 0 {
					out.endBlock()
				}
			case "tc":
				inCell--
			case "tr":
				out.endBlock()
			case "delText", "instrText", "del", "Fallback":
				skip--
			case "tabs":
				tabs--
			}
		case xml.CharData:
			if inText && skip == 0 {
				out.write(string(t))
			}
		}
		return nil
	})
}

// errFull stops a walk once the text is full, or when a limit of pages or
// sheets is reached.
var errFull = errors.New("text full")

// walkText walks a part whose text goes to out, until out is full or fn
// returns errFull, neither of which is an error.
func (a *archive) walkText(part string, out *collector, fn func(xml.Token) error) error {
	err := a.walk(part, func(tok xml.Token) error {
		if err := fn(tok); err != nil {
			return err
		}
		if out.full {
			return errFull
		}
		return nil
	})
	if errors.Is(err, errFull) {
		return nil
	}
	return err
}

func (a *archive) xlsx(out *collector) error {
	part, err := a.mainPart("xl/workbook.xml")
	if err != nil {
		return err
	}
	rs, err := a.rels(part)
	if err != nil {
		return err
	}
	targets := map[string]string{}
	var shared, styles string
	for _, r := range rs {
		targets[r.ID] = r.Target
		switch {
		case strings.HasSuffix(r.Type, "/sharedStrings"):
			shared = r.Target
		case strings.HasSuffix(r.Type, "/styles"):
			styles = r.Target
		}
	}
	type sheet struct{ name, part string }
	var sheets []sheet
	date1904 := false
	err = a.walk(part, func(tok xml.Token) error {
		if se, ok := tok.(xml.StartElement); ok {
			switch se.Name.Local {
			case "sheet":
				if p, ok := targets[attrNS(se, "r", "id")]; ok {
					sheets = append(sheets, sheet{name: attr(se, "name"), part: p})
				}
			case "workbookPr":
				v := attr(se, "date1904")
				date1904 = v == "1" || v == "true"
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	out.props.Pages = len(sheets)
	dates, err := a.dateStyles(styles)
	if err != nil {
		return err
	}

	// Shared strings: kept in memory, bounded by MaxDecompressed.
	var strs []string
	if shared != "" {
		var cur strings.Builder
		inT, inSI := false, false
		err = a.walk(shared, func(tok xml.Token) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "si":
					inSI = true
					cur.Reset()
				case "t":
					inT = inSI
				case "rPh": // phonetic runs are not the text
					inSI = false
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "si":
					strs = append(strs, cur.String())
					inSI = false
				case "t":
					inT = false
				case "rPh":
					inSI = true
				}
			case xml.CharData:
				if inT && cur.Len() < out.lim.MaxTextBytes {
					cur.Write(t)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}

	for i, sh := range sheets {
		if i >= out.lim.MaxPages {
			out.trunc = true
			break
		}
		if out.full {
			break
		}
		if sh.name != "" {
			out.write(sh.name)
			out.endBlock()
		}
		srs, err := a.rels(sh.part)
		if err != nil {
			return err
		}
		hyperlinks(out, srs)
		var typ string
		var val strings.Builder
		inV, isDate, cells := false, false, 0
		err = a.walkText(sh.part, out, func(tok xml.Token) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "c":
					typ = attr(t, "t")
					style, _ := strconv.Atoi(attr(t, "s"))
					isDate = style >= 0 && style < len(dates) && dates[style]
					val.Reset()
				case "v", "t":
					inV = true
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "v", "t":
					inV = false
				case "c":
					v := val.String()
					switch {
					case typ == "s":
						if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 && n < len(strs) {
							v = strs[n]
						} else {
							v = ""
						}
					case isDate && (typ == "" || typ == "n"):
						v = serialDate(v, date1904)
					}
					if v != "" {
						if cells > 0 {
							out.write("\t")
						}
						out.write(v)
						cells++
					}
				case "row":
					if cells > 0 {
						out.endBlock()
					}
					cells = 0
				}
			case xml.CharData:
				if inV && val.Len() < out.lim.MaxTextBytes {
					val.Write(t)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		out.endPage()
	}
	return nil
}

// dateStyles reads which cell styles of a workbook's styles part show a
// date or a time (indexed by a cell's s attribute): a built-in date format
// (numFmtId 14-22, 27-36, 45-47, 50-58) or a format of its own whose code
// has date or time tokens outside quotes and brackets.
func (a *archive) dateStyles(styles string) ([]bool, error) {
	if styles == "" {
		return nil, nil
	}
	custom := map[int]bool{}
	var out []bool
	inXfs := false
	err := a.walk(styles, func(tok xml.Token) error {
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "numFmt":
				if id, err := strconv.Atoi(attr(t, "numFmtId")); err == nil {
					custom[id] = dateFormatCode(attr(t, "formatCode"))
				}
			case "cellXfs":
				inXfs = true
			case "xf":
				if inXfs {
					id, err := strconv.Atoi(attr(t, "numFmtId"))
					out = append(out, err == nil && (builtinDate(id) || custom[id]))
				}
			}
		case xml.EndElement:
			if t.Name.Local == "cellXfs" {
				inXfs = false
			}
		}
		return nil
	})
	return out, err
}

func builtinDate(id int) bool {
	return id >= 14 && id <= 22 || id >= 27 && id <= 36 || id >= 45 && id <= 47 || id >= 50 && id <= 58
}

// dateFormatCode reports whether a number format code shows a date or a
// time: a y, m, d, h or s outside quoted text, [colour] and [$-locale]
// brackets and escaped characters ("0.00" is not; "yyyy-mm-dd" and
// "[$-409]mmm d" are).
func dateFormatCode(code string) bool {
	quoted, bracket := false, false
	for i := 0; i < len(code); i++ {
		c := code[i]
		switch {
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '[':
			bracket = true
		case c == ']':
			bracket = false
		case bracket:
		case c == '\\' || c == '_' || c == '*':
			i++ // the next character is literal, or a fill
		case strings.IndexByte("ymdhsYMDHS", c) >= 0:
			return true
		}
	}
	return false
}

// serialDate writes a spreadsheet's date serial as an ISO date, with the
// time when it has one ("2024-03-01", "2024-03-01 13:30:00"; "13:30:00"
// for a time alone); the value as it was when it is no number.
func serialDate(v string, date1904 bool) string {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || f > 2958465 { // 9999-12-31
		return v
	}
	epoch := time.Date(1899, 12, 30, 0, 0, 0, 0, time.UTC) // 1900 system, its leap-year bug included
	if date1904 {
		epoch = time.Date(1904, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	days := math.Floor(f)
	secs := math.Round((f - days) * 86400)
	t := epoch.AddDate(0, 0, int(days)).Add(time.Duration(secs) * time.Second)
	switch {
	case days == 0 && secs > 0 && !date1904:
		return t.Format("15:04:05")
	case secs == 0:
		return t.Format("2006-01-02")
	}
	return t.Format("2006-01-02 15:04:05")
}

func (a *archive) pptx(out *collector) error {
	part, err := a.mainPart("ppt/presentation.xml")
	if err != nil {
		return err
	}
	rs, err := a.rels(part)
	if err != nil {
		return err
	}
	targets := map[string]string{}
	for _, r := range rs {
		targets[r.ID] = r.Target
	}
	var slides []string
	err = a.walk(part, func(tok xml.Token) error {
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "sldId" {
			if p, ok := targets[attrNS(se, "r", "id")]; ok {
				slides = append(slides, p)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	out.props.Pages = len(slides)
	for i, sl := range slides {
		if i >= out.lim.MaxPages {
			out.trunc = true
			break
		}
		if out.full {
			break
		}
		srs, err := a.rels(sl)
		if err != nil {
			return err
		}
		hyperlinks(out, srs)
		inT, skip := false, 0
		err = a.walkText(sl, out, func(tok xml.Token) error {
			switch t := tok.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "Fallback":
					skip++
				case "t":
					inT = true
				case "br":
					out.write("\n")
				case "tab":
					out.write("\t")
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "Fallback":
					skip--
				case "t":
					inT = false
				case "p":
					out.endBlock()
				}
			case xml.CharData:
				if inT && skip == 0 {
					out.write(string(t))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		out.endPage()
	}
	return nil
}

// parseISODate reads the dates of office metadata (W3CDTF, ISO 8601 with or
// without a zone); the zero time when it is not one.
func parseISODate(s string) time.Time {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}
