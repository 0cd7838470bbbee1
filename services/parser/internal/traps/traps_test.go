package traps

import (
	"fmt"
	"strings"
	"testing"
)

func TestSameFamily(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"http://h/cal/2026/12", "http://h/cal/2027/1", true},
		{"http://h/list?page=2", "http://h/list?page=10", true},
		{"http://h/news/2024/story-22.html", "http://h/news/2021/story-5.html", true},
		{"http://h/news/1", "http://h/news/1a", false},
		{"http://h/news/1", "http://h/news/", false},
		{"http://h/a/1", "http://h/b/1", false},
		{"http://h/wiki/Foo", "http://h/wiki/Bar", false},
		{"http://h1/cal/1", "http://h2/cal/1", false}, // a host's digits are its name
		{"http://127.0.0.2/cal/1", "http://127.0.0.2/cal/22", true},
		{"http://h?p=1", "http://h?p=2", true},
		{"", "", true},
		{"1", "", false},
		{"1", "22", true}, // no scheme: all of it is read
	} {
		if got := SameFamily(tt.a, tt.b); got != tt.want {
			t.Errorf("SameFamily(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := SameFamily(tt.b, tt.a); got != tt.want {
			t.Errorf("SameFamily(%q, %q) = %v, want %v (not symmetric)", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestFamily(t *testing.T) {
	for in, want := range map[string]string{
		"http://h/cal/2026/11":   "http://h/cal/#/#",
		"http://h/list?page=12":  "http://h/list?page=#",
		"http://h/":              "http://h/",
		"http://127.0.0.2:80/a1": "http://127.0.0.2:80/a#",
		"007x9":                  "#x#",
	} {
		if got := Family(in); got != want {
			t.Errorf("Family(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestShape(t *testing.T) {
	cal := func(y, m int) uint64 {
		return Shape(fmt.Sprintf("Events %d-%02d", y, m), fmt.Sprintf("Events in %d-%02d\nNo events this month.", y, m))
	}
	if cal(2026, 11) != cal(2031, 2) {
		t.Error("two empty months have different shapes")
	}
	if Shape("Story", "the crawler fetches pages") == Shape("Story", "the scheduler keeps a frontier") {
		t.Error("two different texts have one shape")
	}
	if Shape("ab", "c") == Shape("a", "bc") {
		t.Error("the title's end is not kept apart from the text")
	}
}

// calendarShape is the shape of every month of an empty calendar.
var calendarShape = Shape("Events", "No events this month.")

func TestCalendarSuspectedAtFirstRepeat(t *testing.T) {
	d := NewDetector(0)
	// The entry: its new links (the two neighbouring months) are in its
	// family; it repeats nothing.
	if run, suspect := d.Candidate("c", "http://h/cal/2026/11", calendarShape, DefaultAllowance); run != 0 || suspect {
		t.Fatalf("entry: run %d suspect %v, want 0 false", run, suspect)
	}
	// The next month repeats it: its new link (the month after) is cut.
	if run, suspect := d.Candidate("c", "http://h/cal/2026/12", calendarShape, DefaultAllowance); run != 1 || !suspect {
		t.Fatalf("next month: run %d suspect %v, want 1 true", run, suspect)
	}
	if _, suspect := d.Candidate("c", "http://h/cal/2026/10", calendarShape, DefaultAllowance); !suspect {
		t.Fatal("previous month not suspected")
	}
	// Another crawl's calendar is its own.
	if _, suspect := d.Candidate("other", "http://h/cal/2026/12", calendarShape, DefaultAllowance); suspect {
		t.Fatal("another crawl's first month suspected")
	}
	// Switched off.
	if _, suspect := d.Candidate("c", "http://h/cal/2027/1", calendarShape, 0); suspect {
		t.Fatal("suspected with allowance 0")
	}
}

// TestProductivePageEndsTheRun: list pages look alike, but one that
// links new items ends the run, and one whose text differs starts a new
// one.
func TestProductivePageEndsTheRun(t *testing.T) {
	d := NewDetector(0)
	list := Shape("Stories", "Story of host")
	d.Candidate("c", "http://h/list?page=1", list, 2)
	if run, _ := d.Candidate("c", "http://h/list?page=2", list, 2); run != 1 {
		t.Fatalf("run %d, want 1", run)
	}
	d.Productive("c", "http://h/list?page=3")
	if run, suspect := d.Candidate("c", "http://h/list?page=4", list, 2); run != 1 || suspect {
		t.Fatalf("after a productive page: run %d suspect %v, want 1 false", run, suspect)
	}
	if run, _ := d.Candidate("c", "http://h/list?page=5", Shape("Stories", "other text"), 2); run != 0 {
		t.Fatalf("a page of another text: run %d, want 0", run)
	}
	// Productive on a family never seen remembers nothing.
	before := d.Len()
	d.Productive("c", "http://h/news/1")
	if d.Len() != before {
		t.Fatalf("Productive added a family: %d -> %d", before, d.Len())
	}
}

func TestDetectorIsBounded(t *testing.T) {
	d := NewDetector(8)
	for i := range 100 {
		d.Candidate("c", fmt.Sprintf("http://h/%s/1", strings.Repeat("x", i)), 1, 1)
	}
	if d.Len() != 8 {
		t.Fatalf("%d families remembered, want 8", d.Len())
	}
}

// FuzzFamily: SameFamily agrees with Family's names and with the hash the
// Detector keys families by.
func FuzzFamily(f *testing.F) {
	f.Add("http://h/cal/2026/12", "http://h/cal/2027/1")
	f.Add("http://h/a1", "http://h/a")
	f.Add("12x", "1x2")
	f.Fuzz(func(t *testing.T, a, b string) {
		if strings.Contains(a, "#") || strings.Contains(b, "#") {
			return
		}
		same := SameFamily(a, b)
		if named := Family(a) == Family(b); same != named {
			t.Fatalf("SameFamily(%q, %q) = %v but Family gives %q and %q", a, b, same, Family(a), Family(b))
		}
		if same && familyHash(a) != familyHash(b) {
			t.Fatalf("one family, two hashes: %q %q", a, b)
		}
	})
}

func TestStep(t *testing.T) {
	for _, tt := range []struct {
		from, to string
		want     bool
	}{
		{"http://h/cal/2026/11", "http://h/cal/2026/12", true},
		{"http://h/cal/2026/11", "http://h/cal/2026/10", true},
		{"http://h/cal/2026/12", "http://h/cal/2027/1", true},  // the year counts on, the month wraps
		{"http://h/cal/2027/1", "http://h/cal/2026/12", true},  // and back
		{"http://h/cal/2026/11", "http://h/cal/2027/11", true}, // a year on
		{"http://h/list?page=4", "http://h/list?page=5", true},
		{"http://h/events/2024-01", "http://h/events/2024-02", true},
		{"http://h/sec0/page24.html", "http://h/sec2/page50.html", false}, // a tree's child
		{"http://h/sec1/page25.html", "http://h/sec0/page52.html", false}, // one number steps, the next jumps
		{"http://h/sec0/page24.html", "http://h/sec0/page28.html", false},
		{"http://h/cal/2026/11", "http://h/cal/2026/11", false}, // itself
		{"http://h/cal/2026/11", "http://h/cal/2026/13", false},
		{"http://h/cal/2026/11", "http://g/cal/2026/12", false}, // another host
		{"http://h/a/1", "http://h/b/2", false},
		{"http://h/p/" + strings.Repeat("9", 19), "http://h/p/" + strings.Repeat("9", 18) + "8", false}, // too long to read
	} {
		if got := Step(tt.from, tt.to); got != tt.want {
			t.Errorf("Step(%q, %q) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

// FuzzStep: Step agrees with its model; a step is within one family,
// never to itself, and a step back is a step too.
func FuzzStep(f *testing.F) {
	f.Add("http://h/cal/2026/12", "http://h/cal/2027/1")
	f.Add("http://h/list?page=1", "http://h/list?page=2")
	f.Add("http://h/a0b9", "http://h/a1b0")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := Step(a, b), stepModel(a, b); got != want {
			t.Fatalf("Step(%q, %q) = %v, the model says %v", a, b, got, want)
		}
		if !Step(a, b) {
			return
		}
		if !SameFamily(a, b) || a == b {
			t.Fatalf("Step(%q, %q) but same family %v, equal %v", a, b, SameFamily(a, b), a == b)
		}
		if !Step(b, a) {
			t.Fatalf("Step(%q, %q) but not back", a, b)
		}
	})
}

// stepModel is Step as first written: the family compared, then every
// number of both URLs read into a slice and compared in order. FuzzStep
// holds Step, which reads both URLs once and allocates nothing, to it.
func stepModel(from, to string) bool {
	if !SameFamily(from, to) {
		return false
	}
	nums := func(u string) ([]uint64, bool) {
		var out []uint64
		for i := authority(u); i < len(u); i++ {
			if !isDigit(u[i]) {
				continue
			}
			start := i
			var n uint64
			for ; i < len(u) && isDigit(u[i]); i++ {
				n = n*10 + uint64(u[i]-'0')
			}
			if i-start > 18 {
				return nil, false
			}
			out = append(out, n)
		}
		return out, true
	}
	a, okA := nums(from)
	b, okB := nums(to)
	if !okA || !okB || len(a) != len(b) {
		return false
	}
	k := 0
	for k < len(a) && a[k] == b[k] {
		k++
	}
	if k == len(a) || (a[k]+1 != b[k] && b[k]+1 != a[k]) {
		return false
	}
	for j := k + 1; j < len(a); j++ {
		if a[j] != b[j] && a[j] > 1 && b[j] > 1 {
			return false
		}
	}
	return true
}

func TestStepAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Step("http://h/cal/2026/12", "http://h/cal/2027/1") }); n != 0 {
		t.Errorf("Step allocates %v times a call", n)
	}
}
