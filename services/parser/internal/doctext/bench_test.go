package doctext

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func corpusFiles(tb testing.TB, ext ...string) []string {
	var out []string
	for _, e := range ext {
		m, err := filepath.Glob(filepath.Join("testdata", "corpus", "*."+e))
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range m {
			if !strings.Contains(f, "encrypted") {
				out = append(out, filepath.Base(f))
			}
		}
	}
	return out
}

// pdftotext returns poppler's text of a corpus PDF, "" and false when
// pdftotext is not installed.
func pdftotext(tb testing.TB, name string, layout bool) (string, bool) {
	bin, err := exec.LookPath("pdftotext")
	if err != nil {
		return "", false
	}
	args := []string{"-enc", "UTF-8"}
	if layout {
		args = append(args, "-layout")
	}
	args = append(args, filepath.Join("testdata", "corpus", name), "-")
	out, err := exec.CommandContext(tb.Context(), bin, args...).Output()
	if err != nil {
		tb.Fatalf("pdftotext %s: %v", name, err)
	}
	return string(out), true
}

// BenchmarkPDF reads every PDF of the corpus: CPU time per page, the peak
// growth of the Go heap reading the file once (after a collection), the
// WebAssembly memory of the instance that read it (kept for the next PDF), and (once per file, printed) the words and word pairs of
// pdftotext's text (poppler-utils) found in ours.
func BenchmarkPDF(b *testing.B) {
	// Started outside the measures.
	if _, err := testExtractor.Extract(b.Context(), "", readCorpus(b, "deck.pdf"), nil, Limits{}); err != nil {
		b.Fatal(err)
	}
	type row struct {
		name                             string
		pages                            int
		words                            int
		plainW, plainB, layoutW, layoutB float64
		cpuPage                          time.Duration
		peak, wasm                       int64
	}
	var rows []row
	var refAll, gotAll []string
	var refAllLayout []string
	havePoppler := true
	for _, name := range corpusFiles(b, "pdf") {
		body := readCorpus(b, name)
		peak := startPeak()
		doc, err := testExtractor.Extract(b.Context(), "application/pdf", body, nil, Limits{})
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		r := row{name: name, pages: doc.Properties.Pages, peak: peak(), wasm: idleWasmMemory(b)}
		got := words(doc.Text)
		r.words = len(got)
		if plain, ok := pdftotext(b, name, false); ok {
			layout, _ := pdftotext(b, name, true)
			ref, refL := words(plain), words(layout)
			r.plainW, r.plainB = wordShare(ref, got), bigramShare(ref, got)
			r.layoutW, r.layoutB = wordShare(refL, got), bigramShare(refL, got)
			refAll, refAllLayout = append(refAll, ref...), append(refAllLayout, refL...)
			gotAll = append(gotAll, got...)
		} else {
			havePoppler = false
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for range b.N {
				if _, err := testExtractor.Extract(b.Context(), "application/pdf", body, nil, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			r.cpuPage = (cpuTime() - start) / time.Duration(b.N*max(1, r.pages))
			b.ReportMetric(float64(r.cpuPage.Microseconds())/1000, "cpu-ms/page")
			b.ReportMetric(float64(r.peak)/(1<<20), "peak-heap-MB")
		})
		rows = append(rows, r)
	}
	fmt.Println()
	if !havePoppler {
		fmt.Println("pdftotext not found (apt-get install poppler-utils): no comparison with poppler")
	}
	fmt.Printf("%-36s %5s %6s %14s %14s %14s %14s %12s %10s %10s\n", "pdf", "pages", "words", "pdftotext w%", "bigrams%", "-layout w%", "bigrams%", "cpu ms/page", "heap MB", "wasm MB")
	for _, r := range rows {
		fmt.Printf("%-36s %5d %6d %14.1f %14.1f %14.1f %14.1f %12.2f %10.1f %10.1f\n", r.name, r.pages, r.words,
			100*r.plainW, 100*r.plainB, 100*r.layoutW, 100*r.layoutB, float64(r.cpuPage.Microseconds())/1000, float64(r.peak)/(1<<20), float64(r.wasm)/(1<<20))
	}
	if havePoppler {
		fmt.Printf("%-36s %5s %6d %14.1f %14.1f %14.1f %14.1f\n", "all", "", len(gotAll),
			100*wordShare(refAll, gotAll), 100*bigramShare(refAll, gotAll), 100*wordShare(refAllLayout, gotAll), 100*bigramShare(refAllLayout, gotAll))
	}
}

// BenchmarkOffice reads every office file of the corpus: CPU time per
// file, the peak growth of the Go heap reading it once.
func BenchmarkOffice(b *testing.B) {
	for _, name := range corpusFiles(b, "docx", "xlsx", "pptx", "odt", "ods", "odp") {
		body := readCorpus(b, name)
		peak := startPeak()
		if _, err := testExtractor.Extract(b.Context(), "", body, nil, Limits{}); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		p := peak()
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for range b.N {
				if _, err := testExtractor.Extract(b.Context(), "", body, nil, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - start
			b.ReportMetric(float64((cpu/time.Duration(b.N)).Microseconds())/1000, "cpu-ms/file")
			b.ReportMetric(float64(p)/(1<<20), "peak-heap-MB")
		})
	}
}

// BenchmarkPDFStartup is the cost of the first PDF of a process: PDFium
// compiled from WebAssembly, or loaded from a compilation cache, plus one
// small PDF.
func BenchmarkPDFStartup(b *testing.B) {
	body := readCorpus(b, "deck.pdf")
	run := func(b *testing.B, cacheDir string) {
		peak := startPeak()
		start := cpuTime()
		for range b.N {
			e := New(Config{CacheDir: cacheDir})
			if _, err := e.Extract(b.Context(), "", body, nil, Limits{MaxTime: time.Minute}); err != nil {
				b.Fatal(err)
			}
			e.Close()
		}
		b.ReportMetric(float64((cpuTime()-start)/time.Duration(b.N))/1e9, "cpu-s/start")
		b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MB")
	}
	b.Run("compile", func(b *testing.B) { run(b, "") })
	dir := b.TempDir()
	warm := New(Config{CacheDir: dir})
	_, err := warm.Extract(b.Context(), "", body, nil, Limits{MaxTime: time.Minute})
	warm.Close()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("cached", func(b *testing.B) { run(b, dir) })
	if fi, err := dirSize(dir); err == nil {
		fmt.Printf("compilation cache: %.1f MB\n", float64(fi)/(1<<20))
	}
}

func dirSize(dir string) (int64, error) {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	return n, err
}

// idleWasmMemory is the WebAssembly memory of the idle PDF instance of
// testExtractor (the benchmarks read one PDF at a time: the one that read
// the last PDF, unless it was thrown away).
func idleWasmMemory(tb testing.TB) int64 {
	rt, err := testExtractor.pdfRuntime()
	if err != nil {
		tb.Fatal(err)
	}
	inst, err := rt.pool.GetInstanceWithContext(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	defer inst.Close()
	size, ok := wasmMemorySize(inst)
	if !ok {
		tb.Fatal("no memory size")
	}
	return int64(size)
}
