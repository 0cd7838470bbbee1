package langdetect_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-crawler/trawl/services/parser/internal/langdetect"
)

// corpusLang is testdata/corpus/<code>.txt: paragraphs (one a line) of
// man pages and program messages translated into that language, as
// Debian ships them (testdata/corpus/README.md).
type corpusLang struct {
	code       string
	paragraphs []string
	windows    []string // the paragraphs joined and cut in SampleBytes pieces
}

func loadCorpus(t testing.TB) []corpusLang {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	var langs []corpusLang
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cl := corpusLang{code: strings.TrimSuffix(filepath.Base(f), ".txt")}
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				cl.paragraphs = append(cl.paragraphs, l)
			}
		}
		all := strings.Join(cl.paragraphs, "\n")
		for len(all) > langdetect.SampleBytes/2 {
			w := langdetect.Cut(all, langdetect.SampleBytes)
			cl.windows = append(cl.windows, w)
			all = all[len(w):]
		}
		langs = append(langs, cl)
	}
	return langs
}

// tally counts a detector's answers over samples of one language.
type tally struct{ right, unsure, wrong int }

func (t *tally) add(got, want string) {
	switch got {
	case want:
		t.right++
	case "":
		t.unsure++
	default:
		t.wrong++
	}
}

func (t tally) String() string { return fmt.Sprintf("%3d/%3d/%3d", t.right, t.unsure, t.wrong) }

// unknown are the corpus languages neither detector has a profile of
// (Catalan, Slovak): they come out as a neighbour (Spanish, Czech) or
// unsure, and are reported, not compared.
var unknown = map[string]bool{"ca": true, "sk": true}

// TestCorpusAccuracy compares Detect with whatlanggo alone (the
// detector before the fast path) on every paragraph and every 2 KiB
// window of the corpus: in every language whatlanggo knows, Detect
// must be right at least as often and wrong no more often; its fast
// paths (script, trigrams) must never be wrong where whatlanggo is
// right; and the fast paths must answer at least 95 % of the 2 KiB
// windows (the fallback costs 0.5-1 ms). Run with -v for the table.
func TestCorpusAccuracy(t *testing.T) {
	var sumNew, sumOld tally
	paths := map[string]int{}
	var fastWrong []string
	windows, windowsFallback := 0, 0
	for _, cl := range loadCorpus(t) {
		var newP, oldP, newW, oldW tally
		check := func(s string, nw, od *tally) {
			got, p := langdetect.DetectPath(s)
			paths[p]++
			old := langdetect.Fallback(s)
			nw.add(got, cl.code)
			od.add(old, cl.code)
			sumNew.add(got, cl.code)
			sumOld.add(old, cl.code)
			if (p == "script" || p == "trigrams") && got != cl.code && old == cl.code {
				fastWrong = append(fastWrong, fmt.Sprintf("%s: %s says %q, whatlanggo %q: %.80q", cl.code, p, got, old, s))
			}
		}
		for _, p := range cl.paragraphs {
			check(p, &newP, &oldP)
		}
		for _, w := range cl.windows {
			check(w, &newW, &oldW)
			if _, p := langdetect.DetectPath(w); p == "fallback" && !unknown[cl.code] {
				windowsFallback++
			}
			windows++
		}
		t.Logf("%s paragraphs (right/unsure/wrong) new %v old %v; 2 KiB windows new %v old %v", cl.code, newP, oldP, newW, oldW)
		if unknown[cl.code] {
			continue
		}
		if newP.right+newW.right < oldP.right+oldW.right || newP.wrong+newW.wrong > oldP.wrong+oldW.wrong {
			t.Errorf("%s: Detect right %d wrong %d times, whatlanggo right %d wrong %d", cl.code,
				newP.right+newW.right, newP.wrong+newW.wrong, oldP.right+oldW.right, oldP.wrong+oldW.wrong)
		}
	}
	t.Logf("all: new %v, old %v; answered by %v; 2 KiB windows to the fallback: %d of %d", sumNew, sumOld, paths, windowsFallback, windows)
	if windowsFallback*20 > windows {
		t.Errorf("%d of %d 2 KiB windows went to the fallback", windowsFallback, windows)
	}
	slices.Sort(fastWrong)
	for _, s := range fastWrong {
		t.Error(s)
	}
}

// BenchmarkDetectCorpus detects each corpus language's 2 KiB windows
// (a page's sample) and paragraphs (100 B - 1.5 KB, a short page),
// reporting µs per page, the share Detect got right, the share sent to
// the fallback (whatlanggo), and the share right among the samples the
// fast paths answered and among those the fallback did; sub-benchmark
// "whatlanggo" is the detector before the fast path on the same
// samples. `go test -bench DetectCorpus -cpu 1 ./internal/langdetect`.
func BenchmarkDetectCorpus(b *testing.B) {
	for _, cl := range loadCorpus(b) {
		for _, set := range []struct {
			name    string
			samples []string
		}{{"2KiB", cl.windows}, {"para", cl.paragraphs}} {
			var right, fallback, fallbackRight, oldRight int
			for _, s := range set.samples {
				got, p := langdetect.DetectPath(s)
				if got == cl.code {
					right++
				}
				if p == "fallback" {
					fallback++
					if got == cl.code {
						fallbackRight++
					}
				}
				if langdetect.Fallback(s) == cl.code {
					oldRight++
				}
			}
			n := float64(len(set.samples))
			b.Run(cl.code+"/"+set.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					for _, s := range set.samples {
						langdetect.Detect(s)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/page")
				b.ReportMetric(100*float64(right)/n, "right%")
				b.ReportMetric(100*float64(fallback)/n, "fallback%")
				if fast := len(set.samples) - fallback; fast > 0 {
					b.ReportMetric(100*float64(right-fallbackRight)/float64(fast), "fast-right%")
				}
				if fallback > 0 {
					b.ReportMetric(100*float64(fallbackRight)/float64(fallback), "fallback-right%")
				}
				b.ReportMetric(0, "ns/op")
			})
			b.Run(cl.code+"/"+set.name+"/whatlanggo", func(b *testing.B) {
				for b.Loop() {
					for _, s := range set.samples {
						langdetect.Fallback(s)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/page")
				b.ReportMetric(100*float64(oldRight)/n, "right%")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
