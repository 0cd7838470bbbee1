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
	for _, tt := range []struct {
		name  string
		cache *ResolveCache
	}{{"uncached", nil}, {"cached", NewResolveCache(1 << 12)}} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r, err := NewResolver("https://www.example.com/news/2021/story-1.html")
				if err != nil {
					b.Fatal(err)
				}
				r.WithCache(tt.cache)
				for _, ref := range pageRefs {
					_, _ = r.Resolve(ref) // mailto: ErrScheme, like on a page
				}
			}
		})
	}
}
