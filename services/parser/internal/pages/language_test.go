package pages_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
)

// TestLanguageDetectedStored: a German page that declares lang="en",
// produced to the broker, lands in ClickHouse with documents.language
// "en" (what it declares) and documents.language_detected "de" (what its
// text is); the document published carries both. A page with too little
// text to judge stores language_detected ”. Detection is on
// (--detect-language); off, nothing is detected.
func TestLanguageDetectedStored(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("detect=%v", on), func(t *testing.T) { languageDetected(t, on) })
	}
}

func languageDetected(t *testing.T, on bool) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r, store := startDocumentParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048,
		PublishDocuments: true, DetectLanguage: on}, now)

	german := `<!doctype html><html lang="en"><head><title>Stadtrat</title></head><body>
<h1>Neuer Haushalt beschlossen</h1>
<p>Der Stadtrat hat am Dienstagabend über den neuen Haushalt für das kommende Jahr beraten. Nach einer
langen Diskussion einigten sich die Mitglieder darauf, mehr Geld für den öffentlichen Nahverkehr
auszugeben und die alte Brücke über den Fluss zu reparieren, die seit dem letzten Winter für den
Schwerverkehr gesperrt ist.</p></body></html>`
	r.produce(ctx, htmlPage("http://127.0.0.2/haushalt", 1, german, now),
		htmlPage("http://127.0.0.2/short", 1, `<html lang="de"><body><p>Anmelden</p></body></html>`, now))

	for _, d := range readDocuments(t, ctx, r.kc, 2) {
		if d.GetUrl() == "http://127.0.0.2/haushalt" && on && (d.GetLanguage() != "en" || d.GetLanguageDetected() != "de") {
			t.Errorf("published document: language %q, language_detected %q", d.GetLanguage(), d.GetLanguageDetected())
		}
		if !on && d.GetLanguageDetected() != "" {
			t.Errorf("detection off, but %s published language_detected %q", d.GetUrl(), d.GetLanguageDetected())
		}
	}

	got := storedByURL(t, ctx, store, `SELECT url, language, language_detected FROM documents FINAL WHERE crawl_id = 'c'`, 2)
	want := []string{"en", "de"}
	if !on {
		want[1] = ""
	}
	if g := got["http://127.0.0.2/haushalt"]; !slices.Equal(g, want) {
		t.Errorf("german page declared en: language, language_detected %q, want %q", g, want)
	}
	if g := got["http://127.0.0.2/short"]; !slices.Equal(g, []string{"de", ""}) {
		t.Errorf("short page: %q, want [de \"\"]", g)
	}
}
