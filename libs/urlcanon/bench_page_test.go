package urlcanon

import "testing"

// pageRefs is the mix of references a news page links to: navigation
// (root-relative), neighbours (relative), its own site spelled absolutely,
// other sites, pagination queries, anchors and the odd mailto.
var pageRefs = []string{
	"/",
	"/news/",
	"/news/2021/story-2.html",
	"/search?q=crawler&lang=en",
	"/tag/go-lang",
	"story-3.html",
	"story-4.html?page=2",
	"./story-5.html",
	"../2020/story-6.html",
	"?page=2",
	"https://www.example.com/about",
	"https://www.example.com/contact#form",
	"https://cdn.example.net/img/header.png",
	"//static.example.org/css/site.css",
	"https://twitter.com/share?url=https://www.example.com/news/2021/story-1.html",
	"http://partner.example.co.uk:8080/offer",
	"#top",
	"story-7.html#comments",
	"mailto:desk@example.com",
	"https://bücher.example/roman",
}

// BenchmarkResolvePage resolves a page's links the way the parser does:
// one Resolver per page (one op), with and without the shared cache.
func BenchmarkResolvePage(b *testing.B) {
	benchResolve(b, "https://www.example.com/news/2021/story-1.html", pageRefs, false)
}

// benchResolve resolves refs against base with a Resolver per op, with and
// without a shared cache; strict fails on an error (pageRefs hold a
// mailto: link, an error as on a page).
func benchResolve(b *testing.B, base string, refs []string, strict bool) {
	for _, tt := range []struct {
		name  string
		cache *ResolveCache
	}{{"uncached", nil}, {"cached", NewResolveCache(1 << 12)}} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewResolver(base)
				if err != nil {
					b.Fatal(err)
				}
				r.WithCache(tt.cache)
				for _, ref := range refs {
					if _, err := r.Resolve(ref); err != nil && strict {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// spellingBase and spellingRefs are a page of the benchmark web
// (deployments/local/internal/websim, func spell) and its links to two
// stories, one of the page's year and one of another, in each of the 13
// spellings the web uses: absolute, upper-case scheme, scheme-relative,
// root-relative, relative ("story-37.html", "../2022/story-8.html"), "./",
// "./../", a ".." through the archive, empty query, fragment, escaped
// unreserved characters, a session path parameter and a "." segment.
const spellingBase = "http://127.1.0.5:35325/news/2021/story-31.html"

var spellingRefs = []string{
	"http://127.1.0.5:35325/news/2021/story-37.html",
	"HTTP://127.1.0.5:35325/news/2021/story-37.html",
	"//127.1.0.5:35325/news/2021/story-37.html",
	"/news/2021/story-37.html",
	"story-37.html",
	"./story-37.html",
	"/news/archive/../2021/story-37.html",
	"/news/2021/story-37.html?",
	"/news/2021/story-37.html#comments",
	"/news/2021/story%2D37.html",
	"/news/2021/%73tory-37.html",
	"/news/2021/story-37.html;jsessionid=0123456789ABCDEF0123456789ABCDEF",
	"/news/2021/./story-37.html",
	"http://127.1.0.5:35325/news/2022/story-8.html",
	"HTTP://127.1.0.5:35325/news/2022/story-8.html",
	"//127.1.0.5:35325/news/2022/story-8.html",
	"/news/2022/story-8.html",
	"../2022/story-8.html",
	"./../2022/story-8.html",
	"/news/archive/../2022/story-8.html",
	"/news/2022/story-8.html?",
	"/news/2022/story-8.html#comments",
	"/news/2022/story%2D8.html",
	"/news/2022/%73tory-8.html",
	"/news/2022/story-8.html;jsessionid=0123456789ABCDEF0123456789ABCDEF",
	"/news/2022/./story-8.html",
}

// BenchmarkResolveSpellings resolves the benchmark web's spellings the way
// the parser does: one Resolver per page (one op), with and without the
// shared cache.
func BenchmarkResolveSpellings(b *testing.B) {
	benchResolve(b, spellingBase, spellingRefs, true)
}
