package pages_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/chstore"
	"github.com/trawl-crawler/trawl/services/parser/internal/pages"
	"github.com/trawl-crawler/trawl/testkit/chtest"
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
	store := chtest.NewStore(t)
	log := zaptest.NewLogger(t)
	fast := chstore.BatchOptions{FlushInterval: 20 * time.Millisecond}
	docs := chstore.NewBatchWriter(store, chstore.Documents, fast, log, nil)
	meta := chstore.NewBatchWriter(store, chstore.DocumentMeta, fast, log, nil)
	seen := chstore.NewBatchWriter(store, chstore.ContentSeen, fast, log, nil)
	runWriters(t, docs, meta, seen)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := startParser(t, pages.Config{MaxOutlinks: 10, MaxTextBytes: 1 << 20, BatchSize: 10, MaxURLLength: 2048, PublishDocuments: true, DetectLanguage: on},
		pages.Sinks{Documents: docs, Meta: meta, ContentSeen: seen, Seen: store}, now)

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

	type row struct{ declared, detected string }
	got := make(map[string]row)
	waitFor(t, ctx, "documents rows", func() bool {
		rows, err := store.Conn().Query(ctx, `SELECT url, language, language_detected FROM documents FINAL WHERE crawl_id = 'c'`)
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		defer rows.Close()
		clear(got)
		for rows.Next() {
			var (
				url string
				r   row
			)
			if err := rows.Scan(&url, &r.declared, &r.detected); err != nil {
				t.Fatalf("scan: %v", err)
			}
			got[url] = r
		}
		return len(got) == 2
	})
	want := row{"en", "de"}
	if !on {
		want.detected = ""
	}
	if g := got["http://127.0.0.2/haushalt"]; g != want {
		t.Errorf("german page declared en: %+v, want %+v", g, want)
	}
	if g := got["http://127.0.0.2/short"]; g != (row{"de", ""}) {
		t.Errorf("short page: %+v, want {de \"\"}", g)
	}
}
