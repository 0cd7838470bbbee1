package doctext

import "testing"

// FuzzKind: Kind never panics and names a format or nothing.
func FuzzKind(f *testing.F) {
	f.Add("", []byte("%PDF-1.4"))
	f.Add("application/zip", readCorpus(f, "sales.ods"))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		switch k := Kind(ct, body); k {
		case "", FormatPDF, FormatDOCX, FormatXLSX, FormatPPTX, FormatODT, FormatODS, FormatODP:
		default:
			t.Errorf("Kind = %q", k)
		}
	})
}
