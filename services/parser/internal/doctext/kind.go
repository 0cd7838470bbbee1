package doctext

import (
	"archive/zip"
	"bytes"
	"mime"
	"strings"

	"github.com/trawl-crawler/trawl/libs/doctypes"
)

// Formats, as Kind names them.
const (
	FormatPDF  = "pdf"
	FormatDOCX = "docx"
	FormatXLSX = "xlsx"
	FormatPPTX = "pptx"
	FormatODT  = "odt"
	FormatODS  = "ods"
	FormatODP  = "odp"
)

// mediaTypes maps the media types of the formats (macro-enabled and template
// variants included) to their format.
var mediaTypes = map[string]string{
	"application/pdf":   FormatPDF,
	"application/x-pdf": FormatPDF,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document":   FormatDOCX,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.template":   FormatDOCX,
	"application/vnd.ms-word.document.macroenabled.12":                          FormatDOCX,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":         FormatXLSX,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.template":      FormatXLSX,
	"application/vnd.ms-excel.sheet.macroenabled.12":                            FormatXLSX,
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": FormatPPTX,
	"application/vnd.openxmlformats-officedocument.presentationml.slideshow":    FormatPPTX,
	"application/vnd.ms-powerpoint.presentation.macroenabled.12":                FormatPPTX,
	"application/vnd.oasis.opendocument.text":                                   FormatODT,
	"application/vnd.oasis.opendocument.text-template":                          FormatODT,
	"application/vnd.oasis.opendocument.spreadsheet":                            FormatODS,
	"application/vnd.oasis.opendocument.spreadsheet-template":                   FormatODS,
	"application/vnd.oasis.opendocument.presentation":                           FormatODP,
	"application/vnd.oasis.opendocument.presentation-template":                  FormatODP,
}

// Kind says which reader takes a document: one of the Format* constants, or
// "" when none does. It trusts a specific media type; for a missing or
// generic one (application/octet-stream, application/zip, binary/octet-
// stream, …) it looks at the bytes: "%PDF-" in the first KiB, or a zip
// holding an ODF mimetype entry or an OOXML main part.
func Kind(contentType string, body []byte) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(contentType))
	}
	if f, ok := mediaTypes[mt]; ok {
		return f
	}
	if mt != "" && !doctypes.Generic(mt) && mt != "application/zip" && mt != "application/x-zip-compressed" {
		return ""
	}
	return sniff(body)
}

// sniff tells the format from the bytes.
func sniff(body []byte) string {
	head := body[:min(len(body), 1024)]
	if bytes.Contains(head, []byte("%PDF-")) {
		return FormatPDF
	}
	if !bytes.HasPrefix(body, []byte("PK\x03\x04")) {
		return ""
	}
	// ODF stores its media type first, uncompressed, in an entry named
	// "mimetype": the local header is 30 bytes, then the name, the extra
	// field and the bytes.
	if len(body) > 38 && string(body[30:38]) == "mimetype" {
		nameLen := int(body[26]) | int(body[27])<<8
		extraLen := int(body[28]) | int(body[29])<<8
		start := 30 + nameLen + extraLen
		if start < len(body) {
			rest := body[start:min(len(body), start+80)]
			for mt, f := range mediaTypes {
				if strings.HasPrefix(mt, "application/vnd.oasis.") && bytes.HasPrefix(rest, []byte(mt)) && !bytes.HasPrefix(rest, []byte(mt+"-")) {
					return f
				}
			}
		}
	}
	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		// A cut zip has no central directory, but its local headers
		// still name the parts: the reader will say it is truncated.
		for _, p := range [...]struct{ name, format string }{
			{"word/document.xml", FormatDOCX}, {"xl/workbook.xml", FormatXLSX}, {"ppt/presentation.xml", FormatPPTX},
		} {
			if bytes.Contains(body, []byte(p.name)) {
				return p.format
			}
		}
		return ""
	}
	for i, f := range zr.File {
		if i > 1000 {
			break
		}
		switch f.Name {
		case "word/document.xml":
			return FormatDOCX
		case "xl/workbook.xml":
			return FormatXLSX
		case "ppt/presentation.xml":
			return FormatPPTX
		}
	}
	return ""
}
