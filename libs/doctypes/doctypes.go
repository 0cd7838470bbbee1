// Package doctypes names the kinds of document beyond HTML a crawl may
// keep (CrawlSpec.documents; issue 37): which media types the fetchers
// download and publish, and the parsers read into documents. HTML and
// text are always kept; anything else only when the crawl's specification
// lists it.
//
// The package is pure: no I/O.
package doctypes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
)

// The media types the parsers read beyond HTML and text.
const (
	PDF  = "application/pdf"
	DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
	XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
	PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
	ODT  = "application/vnd.oasis.opendocument.text"
	ODS  = "application/vnd.oasis.opendocument.spreadsheet"
	ODP  = "application/vnd.oasis.opendocument.presentation"
)

// Known are the media types a crawl may list, in a stable order.
var Known = []string{PDF, DOCX, XLSX, PPTX, ODT, ODS, ODP}

// aliases are the short names a person may write for a family of types
// (the launcher's --documents, the console's form, the API).
var aliases = map[string][]string{
	"pdf":    {PDF},
	"office": {DOCX, XLSX, PPTX, ODT, ODS, ODP},
	"docx":   {DOCX},
	"xlsx":   {XLSX},
	"pptx":   {PPTX},
	"odt":    {ODT},
	"ods":    {ODS},
	"odp":    {ODP},
	"all":    Known,
}

// Expand turns what a person wrote (media types, or the short names pdf,
// office, docx, xlsx, pptx, odt, ods, odp and all) into the media types
// of a specification, each once, in Known's order. A type the parsers
// cannot read is an error.
func Expand(names []string) ([]string, error) {
	want := make(map[string]bool, len(names))
	for _, n := range names {
		n = strings.ToLower(strings.TrimSpace(n))
		if n == "" {
			continue
		}
		if types, ok := aliases[n]; ok {
			for _, t := range types {
				want[t] = true
			}
			continue
		}
		if !slices.Contains(Known, n) {
			return nil, fmt.Errorf("content type %q: the parsers read %s (or pdf, office, all)", n, strings.Join(Known, ", "))
		}
		want[n] = true
	}
	var out []string
	for _, t := range Known {
		if want[t] {
			out = append(out, t)
		}
	}
	return out, nil
}

// Validate reports a specification's type the parsers cannot read.
func Validate(d *crawlv1.Documents) error {
	for _, t := range d.GetContentTypes() {
		if !slices.Contains(Known, t) {
			return fmt.Errorf("content type %q: the parsers read %s", t, strings.Join(Known, ", "))
		}
	}
	return nil
}

// Short names a media type as people do ("pdf", "docx"), the type itself
// when it has no short name.
func Short(mediaType string) string {
	for n, types := range aliases {
		if len(types) == 1 && types[0] == mediaType {
			return n
		}
	}
	return mediaType
}

// extensions are the file extensions of the types, for a server that
// sends a document as application/octet-stream.
var extensions = map[string]string{
	".pdf": PDF, ".docx": DOCX, ".xlsx": XLSX, ".pptx": PPTX, ".odt": ODT, ".ods": ODS, ".odp": ODP,
}

// generic are the media types servers send when they do not say what a
// file is (Generic).
var generic = []string{"application/octet-stream", "binary/octet-stream", "application/download",
	"application/x-download", "application/force-download", "application/unknown"}

// Generic reports whether a media type says only that a body is bytes
// (application/octet-stream, binary/octet-stream, application/download
// and the like): what the body is must be told otherwise, by the URL's
// extension or the bytes.
func Generic(mt string) bool { return slices.Contains(generic, mt) }

// KeptType is the media type under which a crawl that keeps the media
// types kept (its specification's documents.content_types) keeps an answer
// of media type mt for a URL path: mt when kept lists it; when mt is
// generic (application/octet-stream and the like) or missing, the type of
// the path's extension if kept lists it ("/a/manual.PDF" is a PDF); else
// "".
func KeptType(kept []string, mt, path string) string {
	if mt != "" && slices.Contains(kept, mt) {
		return mt
	}
	if mt != "" && !Generic(mt) {
		return ""
	}
	dot := strings.LastIndexByte(path, '.')
	if dot < 0 || strings.IndexByte(path[dot:], '/') >= 0 {
		return ""
	}
	if t := extensions[strings.ToLower(path[dot:])]; t != "" && slices.Contains(kept, t) {
		return t
	}
	return ""
}
