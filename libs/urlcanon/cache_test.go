package urlcanon

import (
	"fmt"
	"testing"
)

// resolveBoth resolves ref against base with and without the shared cache c.
func resolveBoth(t *testing.T, c *ResolveCache, base, ref string) (cached, plain string, cachedErr, plainErr error) {
	t.Helper()
	r1, err := NewResolver(base)
	if err != nil {
		return "", "", err, err
	}
	r2, _ := NewResolver(base)
	cached, cachedErr = r1.WithCache(c).Resolve(ref)
	plain, plainErr = r2.Resolve(ref)
	return
}

// TestResolveCache: references resolved against many bases through one
// cache give what they give without it, and the shareable ones are hits.
func TestResolveCache(t *testing.T) {
	c := NewResolveCache(1 << 10)
	bases := []string{
		"http://a.example/news/2021/story-1.html?x=1",
		"http://a.example/news/2021/story-2.html",
		"http://a.example/news/2022/story-3.html",
		"https://a.example/news/2021/story-1.html",
		"http://u@a.example:8080/news/2021/story-1.html",
		"http://b.example/news/2021/",
		"ftp://a.example/news/2021/x",
	}
	refs := []string{
		"story-5.html", "./story-5.html", "../2020/story-7.html", "/news/2021/story-5.html", "/news/x/../y",
		"//b.example/p", "http://c.example/q?", "HTTP://C.example/q", "https://a.example/s", "http:rel", "https:rel",
		"?page=2", "#frag", "", "javascript:void(0)", "mailto:x@y", "\\\\evil/x", "/\\evil/x", " story-5.html",
		"sto\nry.html", "story%2D5.html", "?", "..", ".", "x:y", "1:y", "a b",
	}
	for round := range 2 {
		for _, b := range bases {
			for _, ref := range refs {
				got, want, gerr, werr := resolveBoth(t, c, b, ref)
				if got != want || (gerr == nil) != (werr == nil) {
					t.Errorf("round %d: Resolve(%q, %q) cached = %q, %v; uncached = %q, %v", round, b, ref, got, gerr, want, werr)
				}
			}
		}
	}
	// What pages share is cached once per shared base part.
	if n := len(c.cur) + len(c.old); n == 0 || n >= len(bases)*len(refs) {
		t.Errorf("%d entries for %d bases × %d references", n, len(bases), len(refs))
	}
}

func TestResolveCacheGenerations(t *testing.T) {
	c := NewResolveCache(8) // generations of 4
	r, err := NewResolver("http://a.example/d/p")
	if err != nil {
		t.Fatal(err)
	}
	r.WithCache(c)
	for i := range 12 {
		if _, err := r.Resolve(fmt.Sprintf("/p%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.cur) > 4 || len(c.old) > 4 {
		t.Errorf("generations of %d and %d entries, want at most 4 each", len(c.cur), len(c.old))
	}
	if NewResolveCache(1) != nil {
		t.Error("a cache of 1 entry: want none")
	}
}

// FuzzResolveCache: whatever the bases and the reference, a resolution
// through a cache shared by pages of one directory equals the uncached one.
func FuzzResolveCache(f *testing.F) {
	f.Add("a.example", "news/2021", "story-1.html", "x=1", "story-2.html", "../p?q#f")
	f.Add("a.example:81", "", "", "", "index", "//b/c")
	f.Add("h", "a/b", "c", "", "d", "/\\x")
	f.Add("h", "a", "b", "y", "c", "?z")
	f.Fuzz(func(t *testing.T, host, dir, file1, query, file2, ref string) {
		c := NewResolveCache(64)
		b1 := "http://" + host + "/" + dir + "/" + file1 + "?" + query
		b2 := "http://" + host + "/" + dir + "/" + file2
		for _, b := range []string{b1, b2, b1} {
			got, want, gerr, werr := resolveBoth(t, c, b, ref)
			if got != want || (gerr == nil) != (werr == nil) {
				t.Fatalf("Resolve(%q, %q) cached = %q, %v; uncached = %q, %v", b, ref, got, gerr, want, werr)
			}
		}
	})
}

func BenchmarkResolveCached(b *testing.B) {
	c := NewResolveCache(1 << 12)
	refs := []string{"/news/2021/story-5.html", "story-6.html", "../2020/story-7.html", "http://b.example/x", "?page=2"}
	for _, tt := range []struct {
		name  string
		cache *ResolveCache
	}{{"uncached", nil}, {"cached", c}} {
		b.Run(tt.name, func(b *testing.B) {
			r, err := NewResolver("http://a.example/news/2021/story-1.html")
			if err != nil {
				b.Fatal(err)
			}
			r.WithCache(tt.cache)
			for i := 0; b.Loop(); i++ {
				if _, err := r.Resolve(refs[i%len(refs)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
