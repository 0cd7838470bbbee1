package websim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The shop web (Config.Shop) is a web of shops whose every product page
// carries values known in advance: a crawl's extraction rules
// (deployments/local/bench/shop-extract.json) and its structured data
// are checked against them, exactly (ShopProduct, Product.Check). Every
// host serves:
//
//	/                      home: the categories and a few products
//	/c/<k>?page=<p>        category k's list of products, ShopPerList... each; previous and next page
//	/product/<n>           product n (Config.Articles of them): 10–30 KB, 20–60 links
//	/manual/<n>.pdf        the product's manual (some products): a PDF of 2-3 pages
//	/spec/<n>.docx         the product's spec sheet (some products): a docx
//
// A product page's values are generated from (seed, host, n) alone
// (ShopProduct): its name, price (formatted "$1,299.50", or "1.299,50 €"
// on every third host), SKU (in <meta itemprop=sku>), release date in
// one of five formats, images (relative URLs), a description with inner
// HTML, tags and stock. It publishes a JSON-LD Product (alone, in an
// @graph with a BreadcrumbList, or next to a second block, an
// Organization; one page in 20 has a third block that is malformed),
// microdata (an itemscope Product with its Offer) and OpenGraph and
// Twitter card properties.
const (
	shopCategories = 5
	shopFeatured   = 6
	// ShopDocAuthor is the author of every manual and spec sheet.
	ShopDocAuthor = "Trawl Shop Documentation"
)

// Kinds of the shop web's resources (Stats.ByKind).
const (
	KindProduct  = "product"
	KindDocument = "document" // a manual (PDF) or a spec sheet (docx)
)

// Media types of the shop's documents.
const (
	typePDF  = "application/pdf"
	typeDOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
)

// Seeds for Web.rng of the shop web.
const (
	rngShopProduct uint64 = iota + 32
	rngShopPage
)

var (
	shopCategoryNames = [shopCategories]string{"Kitchen", "Lighting", "Furniture", "Tools", "Audio"}
	shopAdjectives    = strings.Fields("Brisk Quiet Solid Nimble Bright Sturdy Compact Classic Rapid Gentle Bold Sleek")
	shopNouns         = [shopCategories][]string{
		strings.Fields("Kettle Blender Toaster Skillet Grinder"),
		strings.Fields("Lamp Lantern Spotlight Sconce Strip"),
		strings.Fields("Chair Desk Shelf Stool Bench"),
		strings.Fields("Drill Saw Wrench Sander Clamp"),
		strings.Fields("Speaker Headset Amplifier Turntable Soundbar"),
	}
	shopTags      = strings.Fields("new sale eco compact wireless classic premium gift bestseller durable portable quiet")
	shopDateForms = []string{"2006-01-02", "January 2, 2006", "2 January 2006", "02.01.2006", "Jan 2, 2006"}
	// shopHead is the articles' head boilerplate without its OpenGraph
	// and Twitter card properties: a product page has its own.
	shopHead = strings.Replace(headBoilerplate,
		`<meta property="og:type" content="article"><meta name="twitter:card" content="summary_large_image">`, "", 1)
)

// Product is what a shop web's product page holds: the values its
// extraction rules take and its structured data, known in advance.
type Product struct {
	Host, N      int
	Name         string
	Category     int // index of the category (CategoryName)
	Cents        int64
	Euro         bool   // priced in EUR, formatted the European way
	PriceText    string // as the page shows it: "$1,299.50", "1.299,50 €"
	SKU          string
	Released     time.Time // a date (UTC midnight)
	ReleasedText string    // as the page shows it, in one of five formats
	Images       []string  // relative URLs, as the page writes them
	Description  string    // inner HTML of the page's description
	Tags         []string
	InStock      bool
	Manual       bool // links /manual/<n>.pdf
	Spec         bool // links /spec/<n>.docx
	// JSONLDShape is how the page writes its JSON-LD: "single" (one
	// Product block), "graph" (an @graph of the Product and a
	// BreadcrumbList) or "two" (the Product and an Organization block);
	// Malformed adds a block that does not parse.
	JSONLDShape string
	Malformed   bool
}

// ShopProduct returns product n of host h of a shop web of this seed: a
// function of (seed, h, n) alone, so that a benchmark that did not run the
// web computes what its pages hold.
func ShopProduct(seed uint64, h, n int) Product {
	rng := rand.New(rand.NewPCG(seed^uint64(h)<<32^rngShopProduct<<56, uint64(n)))
	cat := n % shopCategories
	p := Product{Host: h, N: n, Category: cat, Euro: h%3 == 2}
	p.Name = fmt.Sprintf("%s %s %c%d", shopAdjectives[rng.IntN(len(shopAdjectives))],
		shopNouns[cat][rng.IntN(len(shopNouns[cat]))], 'A'+rune(h%26), 100+n)
	p.Cents = 500 + rng.Int64N(299500)
	if rng.IntN(4) == 0 {
		p.Cents -= p.Cents % 100 // a round price: "$1,299.00"
	}
	p.PriceText = formatPrice(p.Cents, p.Euro)
	letters := make([]byte, 4)
	for i := range letters {
		letters[i] = byte('A' + rng.IntN(26))
	}
	p.SKU = fmt.Sprintf("TS-%03d-%05d-%s", h, n, letters)
	p.Released = time.Date(2018+rng.IntN(9), time.Month(1+rng.IntN(12)), 1+rng.IntN(28), 0, 0, 0, 0, time.UTC)
	p.ReleasedText = p.Released.Format(shopDateForms[n%len(shopDateForms)])
	for k := range 2 + rng.IntN(4) {
		if k%2 == 0 {
			p.Images = append(p.Images, fmt.Sprintf("/img/p%d-%d.jpg", n, k))
		} else {
			p.Images = append(p.Images, fmt.Sprintf("../img/p%d-%d.jpg", n, k)) // from /product/<n>: /img/…
		}
	}
	p.Description = shopDescription(rng)
	perm := rng.Perm(len(shopTags))
	for _, i := range perm[:2+rng.IntN(4)] {
		p.Tags = append(p.Tags, shopTags[i])
	}
	p.InStock = rng.IntN(4) != 0
	p.Manual = n%3 == 0
	p.Spec = n%4 == 1
	p.JSONLDShape = [...]string{"single", "graph", "two"}[n%3]
	p.Malformed = n%20 == 7
	return p
}

// shopDescription is a description's inner HTML, written as
// golang.org/x/net/html renders it (a field that takes inner HTML gives
// it back unchanged).
func shopDescription(rng *rand.Rand) string {
	word := func() string { return words[rng.IntN(len(words))] }
	phrase := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(word())
		}
		return b.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<p>The %s <b>%s</b> %s.</p>", phrase(3), phrase(2), phrase(6))
	fmt.Fprintf(&b, "<p>%s <em>%s</em> %s.</p>", phrase(5), phrase(2), phrase(4))
	b.WriteString("<ul>")
	for range 2 + rng.IntN(3) {
		fmt.Fprintf(&b, "<li>%s</li>", phrase(3))
	}
	b.WriteString("</ul>")
	return b.String()
}

// formatPrice writes cents as "$1,299.50", or with euro as "1.299,50 €".
func formatPrice(cents int64, euro bool) string {
	whole := strconv.FormatInt(cents/100, 10)
	group, dec := ",", "."
	if euro {
		group, dec = ".", ","
	}
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteString(group)
		}
		b.WriteRune(c)
	}
	s := fmt.Sprintf("%s%s%02d", b.String(), dec, cents%100)
	if euro {
		return s + " €"
	}
	return "$" + s
}

// Amount is the price as OpenGraph, microdata and JSON-LD write it: "1299.50".
func (p Product) Amount() string { return fmt.Sprintf("%d.%02d", p.Cents/100, p.Cents%100) }

// Currency is the price's ISO 4217 code.
func (p Product) Currency() string {
	if p.Euro {
		return "EUR"
	}
	return "USD"
}

// CategoryName is the name of the product's category.
func (p Product) CategoryName() string { return shopCategoryNames[p.Category] }

// Path is the product page's path.
func (p Product) Path() string { return "/product/" + strconv.Itoa(p.N) }

// ManualPath and SpecPath are the paths of its documents.
func (p Product) ManualPath() string { return "/manual/" + strconv.Itoa(p.N) + ".pdf" }

// SpecPath is the path of the product's spec sheet.
func (p Product) SpecPath() string { return "/spec/" + strconv.Itoa(p.N) + ".docx" }

func (p Product) availability() string {
	if p.InStock {
		return "https://schema.org/InStock"
	}
	return "https://schema.org/OutOfStock"
}

// abs resolves ref against the page's URL.
func abs(page *url.URL, ref string) string {
	u, err := url.Parse(ref)
	if err != nil {
		return ref
	}
	return page.ResolveReference(u).String()
}

// Fields are the values the shop's extraction rules
// (deployments/local/bench/shop-extract.json) take from the product's
// page at page, as documents.fields holds them decoded: strings, float64
// numbers, dates in RFC 3339, absolute URLs, lists as []any. A field the
// page does not have (a manual, a spec sheet) is absent.
func (p Product) Fields(page *url.URL) map[string]any {
	imgs := make([]any, len(p.Images))
	for i, s := range p.Images {
		imgs[i] = abs(page, s)
	}
	tags := make([]any, len(p.Tags))
	for i, t := range p.Tags {
		tags[i] = t
	}
	price := float64(p.Cents) / 100
	released := p.Released.Format(time.RFC3339)
	f := map[string]any{
		"name": p.Name, "price": price, "price_text": p.PriceText, "currency": p.Currency(), "sku": p.SKU,
		"released": released, "images": imgs, "description": p.Description, "tags": tags,
		"title_xp": p.Name, "price_xp": price, "released_xp": released, "image_xp": imgs[0],
		"description_xp": p.Description, "tags_xp": tags, "tag_count": float64(len(p.Tags)),
		"in_stock": strconv.FormatBool(p.InStock), "category": p.CategoryName(),
	}
	if p.Manual {
		f["manual"] = abs(page, p.ManualPath())
	}
	if p.Spec {
		f["spec_sheet"] = abs(page, p.SpecPath())
	}
	return f
}

// productLD is the page's JSON-LD Product item.
func (p Product) productLD(context bool) map[string]any {
	imgs := make([]any, len(p.Images))
	for i, s := range p.Images {
		imgs[i] = s
	}
	m := map[string]any{
		"@type": "Product", "name": p.Name, "sku": p.SKU, "image": imgs, "category": p.CategoryName(),
		"releaseDate": p.Released.Format("2006-01-02"),
		"offers": map[string]any{"@type": "Offer", "price": p.Amount(), "priceCurrency": p.Currency(),
			"availability": p.availability()},
	}
	if context {
		m["@context"] = "https://schema.org"
	}
	return m
}

// JSONLD returns the JSON-LD items the page publishes, as the parser keeps
// them: each block's object, or each element of an @graph (without the
// block's @context); the malformed block is none.
func (p Product) JSONLD() []any {
	switch p.JSONLDShape {
	case "graph":
		return []any{p.productLD(false), p.breadcrumbLD()}
	case "two":
		return []any{p.productLD(true), shopOrganizationLD(p.Host)}
	}
	return []any{p.productLD(true)}
}

func (p Product) breadcrumbLD() map[string]any {
	return map[string]any{"@type": "BreadcrumbList", "itemListElement": []any{
		map[string]any{"@type": "ListItem", "position": float64(1), "name": p.CategoryName()},
		map[string]any{"@type": "ListItem", "position": float64(2), "name": p.Name},
	}}
}

func shopOrganizationLD(h int) map[string]any {
	return map[string]any{"@context": "https://schema.org", "@type": "Organization", "name": fmt.Sprintf("Shop %d", h)}
}

// jsonLDBlocks are the page's <script type="application/ld+json"> bodies.
func (p Product) jsonLDBlocks() []string {
	enc := func(v any) string {
		b, _ := json.Marshal(v) // maps of strings and numbers always encode
		return string(b)
	}
	var out []string
	switch p.JSONLDShape {
	case "graph":
		out = append(out, enc(map[string]any{"@context": "https://schema.org", "@graph": []any{p.productLD(false), p.breadcrumbLD()}}))
	case "two":
		out = append(out, enc(p.productLD(true)), enc(shopOrganizationLD(p.Host)))
	default:
		out = append(out, enc(p.productLD(true)))
	}
	if p.Malformed {
		// A review cut short: not a JSON object.
		out = append(out, `{"@context": "https://schema.org", "@type": "Review", "reviewBody": "great`)
	}
	return out
}

// Microdata returns the page's microdata items as the parser keeps them
// (URLs resolved against the page).
func (p Product) Microdata(page *url.URL) []any {
	imgs := make([]any, len(p.Images))
	for i, s := range p.Images {
		imgs[i] = abs(page, s)
	}
	return []any{map[string]any{
		"@type": "https://schema.org/Product", "name": p.Name, "sku": p.SKU, "image": imgs,
		"releaseDate": p.Released.Format("2006-01-02"),
		"offers": map[string]any{"@type": "https://schema.org/Offer", "price": p.Amount(),
			"priceCurrency": p.Currency(), "availability": p.availability()},
	}}
}

// OpenGraph returns the page's OpenGraph and Twitter card properties.
func (p Product) OpenGraph(page *url.URL) map[string]any {
	img := abs(page, p.Images[0])
	return map[string]any{
		"og:type": "product", "og:title": p.Name, "og:url": abs(page, p.Path()), "og:image": img,
		"og:price:amount": p.Amount(), "og:price:currency": p.Currency(),
		"twitter:card": "summary_large_image", "twitter:title": p.Name, "twitter:image": img,
	}
}

// shopLists returns the number of list pages of category k of a shop of
// products products.
func shopLists(products, perList, k int) int {
	if k >= products {
		return 0
	}
	n := (products - k + shopCategories - 1) / shopCategories
	return (n + perList - 1) / perList
}

// shopPages returns the content pages of one shop host: the home, the
// category lists and the products.
func (w *Web) shopPages() int {
	n := 1 + w.cfg.Articles
	for k := range shopCategories {
		n += shopLists(w.cfg.Articles, w.cfg.PerList, k)
	}
	return n
}

// shopContentIDs returns host h's content pages as Resource IDs.
func (w *Web) shopContentIDs(h int) []string {
	id := strconv.Itoa(h) + " "
	out := []string{id + "/"}
	for k := range shopCategories {
		for p := 1; p <= shopLists(w.cfg.Articles, w.cfg.PerList, k); p++ {
			out = append(out, id+"/c/"+strconv.Itoa(k)+"?page="+strconv.Itoa(p))
		}
	}
	for n := range w.cfg.Articles {
		out = append(out, id+"/product/"+strconv.Itoa(n))
	}
	return out
}

// Product returns product n of host h of this web (a shop web's).
func (w *Web) Product(h, n int) Product { return ShopProduct(w.cfg.Seed, h, n) }

// serveShop answers a request of a shop host (robots.txt aside).
func (w *Web) serveShop(h int, rw http.ResponseWriter, r *http.Request, p string) string {
	num := func(s string) (int, bool) {
		i, err := strconv.Atoi(s)
		return i, err == nil && i >= 0 && i < w.cfg.Articles && strconv.Itoa(i) == s
	}
	switch {
	case p == "/":
		writeHTML(rw, "utf-8", w.shopHome(h))
		return KindIndex
	case strings.HasPrefix(p, "/c/"):
		k, err := strconv.Atoi(strings.TrimPrefix(p, "/c/"))
		page, perr := strconv.Atoi(r.URL.Query().Get("page"))
		if err != nil || perr != nil || k < 0 || k >= shopCategories || page < 1 || page > shopLists(w.cfg.Articles, w.cfg.PerList, k) {
			http.NotFound(rw, r)
			return KindMissing
		}
		writeHTML(rw, "utf-8", w.shopList(h, k, page))
		return KindList
	case strings.HasPrefix(p, "/product/"):
		n, ok := num(strings.TrimPrefix(p, "/product/"))
		if !ok {
			http.NotFound(rw, r)
			return KindMissing
		}
		writeHTML(rw, "utf-8", w.productPage(h, n))
		return KindProduct
	case strings.HasPrefix(p, "/manual/") && strings.HasSuffix(p, ".pdf"):
		n, ok := num(strings.TrimSuffix(strings.TrimPrefix(p, "/manual/"), ".pdf"))
		if !ok || !w.Product(h, n).Manual {
			http.NotFound(rw, r)
			return KindMissing
		}
		body, err := ManualPDF(w.Product(h, n), "http://"+w.addrs[h])
		if err != nil {
			http.Error(rw, "make manual: "+err.Error(), http.StatusInternalServerError)
			return KindError
		}
		writeBody(rw, typePDF, body)
		return KindDocument
	case strings.HasPrefix(p, "/spec/") && strings.HasSuffix(p, ".docx"):
		n, ok := num(strings.TrimSuffix(strings.TrimPrefix(p, "/spec/"), ".docx"))
		if !ok || !w.Product(h, n).Spec {
			http.NotFound(rw, r)
			return KindMissing
		}
		body, err := SpecDocx(w.Product(h, n))
		if err != nil {
			http.Error(rw, "make spec sheet: "+err.Error(), http.StatusInternalServerError)
			return KindError
		}
		writeBody(rw, typeDOCX, body)
		return KindDocument
	}
	http.NotFound(rw, r)
	return KindUnknown
}

func writeBody(rw http.ResponseWriter, contentType string, body []byte) {
	rw.Header().Set("Content-Type", contentType)
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = rw.Write(body)
}

// shopNav is the navigation every shop page starts its body with.
func shopNav(b *bytes.Buffer) {
	b.WriteString(`<header class="site-header"><div class="site-header__inner">`)
	b.WriteString(logoSVG)
	b.WriteString(`<nav class="site-nav"><ul class="site-nav__list"><li class="site-nav__item"><a class="site-nav__link" href="/">Home</a></li>`)
	for k, name := range shopCategoryNames {
		fmt.Fprintf(b, `<li class="site-nav__item"><a class="site-nav__link" href="/c/%d?page=1">%s</a></li>`, k, name)
	}
	b.WriteString("</ul></nav></div></header>\n")
}

func (w *Web) shopHome(h int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Shop %d</title></head>\n<body>\n", h)
	shopNav(&b)
	b.WriteString("<main><h2>Featured</h2><ul>\n")
	for n := range min(shopFeatured, w.cfg.Articles) {
		p := w.Product(h, n)
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", p.Path(), p.Name)
	}
	b.WriteString("</ul></main>\n</body></html>\n")
	return b.Bytes()
}

func (w *Web) shopList(h, k, page int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s, page %d</title></head>\n<body>\n", shopCategoryNames[k], page)
	shopNav(&b)
	fmt.Fprintf(&b, "<main><h1 class=\"category\">%s</h1>\n<ol class=\"products\">\n", shopCategoryNames[k])
	// Category k holds products k, k+5, k+10, …
	first := k + (page-1)*w.cfg.PerList*shopCategories
	for i, n := 0, first; i < w.cfg.PerList && n < w.cfg.Articles; i, n = i+1, n+shopCategories {
		p := w.Product(h, n)
		fmt.Fprintf(&b, "<li><a class=\"product-link\" href=\"%s\">%s</a> <span class=\"list-price\">%s</span></li>\n", p.Path(), p.Name, p.PriceText)
	}
	b.WriteString("</ol>\n<p class=\"pages\">")
	if page > 1 {
		fmt.Fprintf(&b, "<a href=\"/c/%d?page=%d\">previous</a> ", k, page-1)
	}
	if page < shopLists(w.cfg.Articles, w.cfg.PerList, k) {
		fmt.Fprintf(&b, "<a href=\"?page=%d\">next</a>", page+1)
	}
	b.WriteString("</p></main>\n</body></html>\n")
	return b.Bytes()
}

// productPage generates the page of product n of host h: MinPageBytes to
// MaxPageBytes with MinLinks to MaxLinks links, the product's values and
// structured data first, then its reviews, whose text carries the links
// beyond the navigation.
func (w *Web) productPage(h, n int) []byte {
	p := w.Product(h, n)
	rng := w.rng(h, rngShopPage, uint64(n))
	size := w.cfg.MinPageBytes + rng.IntN(w.cfg.MaxPageBytes-w.cfg.MinPageBytes+1)
	nlinks := w.cfg.MinLinks + rng.IntN(w.cfg.MaxLinks-w.cfg.MinLinks+1)
	self := "http://" + w.addrs[h]
	page, _ := url.Parse(self + p.Path()) // a host:port and a path: always parses
	og := p.OpenGraph(page)

	var b bytes.Buffer
	b.Grow(size + 4096)
	fmt.Fprintf(&b, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s | Shop %d</title>\n", p.Name, h)
	fmt.Fprintf(&b, "<meta name=\"description\" content=\"%s\">\n", w.sentence(rng, false, 14))
	for _, k := range []string{"og:type", "og:title", "og:url", "og:image", "og:price:amount", "og:price:currency"} {
		fmt.Fprintf(&b, "<meta property=\"%s\" content=\"%s\">", k, og[k])
	}
	for _, k := range []string{"twitter:card", "twitter:title", "twitter:image"} {
		fmt.Fprintf(&b, "<meta name=\"%s\" content=\"%s\">", k, og[k])
	}
	b.WriteString("\n")
	b.WriteString(shopHead)
	for _, block := range p.jsonLDBlocks() {
		fmt.Fprintf(&b, "<script type=\"application/ld+json\">%s</script>\n", block)
	}
	b.WriteString("</head>\n<body class=\"page page--product\">\n")
	shopNav(&b)
	links := 1 + shopCategories
	fmt.Fprintf(&b, "<main class=\"layout\"><article class=\"article\">\n<nav class=\"breadcrumb\"><a href=\"/\">Home</a> &rsaquo; <a href=\"/c/%d?page=1\">%s</a></nav>\n",
		p.Category, p.CategoryName())
	links += 2
	b.WriteString("<div class=\"product\" itemscope itemtype=\"https://schema.org/Product\">\n")
	fmt.Fprintf(&b, "<h1 class=\"product-title\" itemprop=\"name\">%s</h1>\n<meta itemprop=\"sku\" content=\"%s\">\n", p.Name, p.SKU)
	b.WriteString("<div class=\"gallery\">")
	for i, img := range p.Images {
		fmt.Fprintf(&b, "<img itemprop=\"image\" src=\"%s\" alt=\"view %d\" width=\"640\" height=\"480\">", img, i+1)
	}
	b.WriteString("</div>\n")
	b.WriteString("<div class=\"offer\" itemprop=\"offers\" itemscope itemtype=\"https://schema.org/Offer\">")
	fmt.Fprintf(&b, "<span class=\"price\">%s</span><meta itemprop=\"price\" content=\"%s\"><meta itemprop=\"priceCurrency\" content=\"%s\"><link itemprop=\"availability\" href=\"%s\">",
		p.PriceText, p.Amount(), p.Currency(), p.availability())
	stock, stockText := "out", "Out of stock"
	if p.InStock {
		stock, stockText = "in", "In stock"
	}
	fmt.Fprintf(&b, "<span class=\"stock\" data-stock=\"%s\">%s</span></div>\n", stock, stockText)
	fmt.Fprintf(&b, "<p class=\"release\">Released <time class=\"released\" itemprop=\"releaseDate\" datetime=\"%s\">%s</time></p>\n",
		p.Released.Format("2006-01-02"), p.ReleasedText)
	b.WriteString("</div>\n")
	fmt.Fprintf(&b, "<div class=\"description\">%s</div>\n<ul class=\"tags\">", p.Description)
	for _, t := range p.Tags {
		fmt.Fprintf(&b, "<li>%s</li>", t)
	}
	b.WriteString("</ul>\n<p class=\"documents\">")
	if p.Manual {
		fmt.Fprintf(&b, "<a class=\"manual\" href=\"%s\">Manual (PDF)</a> ", p.ManualPath())
		links++
	}
	if p.Spec {
		fmt.Fprintf(&b, "<a class=\"spec\" href=\"%s\">Spec sheet (docx)</a>", p.SpecPath())
		links++
	}
	b.WriteString("</p>\n<section class=\"reviews\"><h2>Reviews</h2>\n")
	// The reviews carry the rest of the links, spread over the text as an
	// article's are.
	w.blocks(&b, rng, false, size, max(nlinks-links, 0), `<div class="review" data-review="%d"><p class="review__text">`, "review__link",
		func(int) (string, string) { return w.shopLink(rng, h, n) })
	b.WriteString("</section>\n")
	writeTail(&b, size, h, "")
	return b.Bytes()
}

// shopLink returns the href and text of a link of a review on product n's
// page of host h: mostly other products of the shop, some category pages,
// some products of other shops, a few references off the web.
func (w *Web) shopLink(rng *rand.Rand, h, n int) (href, text string) {
	roll := rng.IntN(100)
	switch {
	case roll < 60:
		m := rng.IntN(w.cfg.Articles)
		return fmt.Sprintf("/product/%d", m), w.Product(h, m).Name
	case roll < 72:
		oh := rng.IntN(w.cfg.Hosts)
		m := rng.IntN(w.cfg.Articles)
		return fmt.Sprintf("http://%s/product/%d", w.addrs[oh], m), "compare at shop " + strconv.Itoa(oh)
	case roll < 85:
		k := rng.IntN(shopCategories)
		return fmt.Sprintf("/c/%d?page=%d", k, 1+rng.IntN(max(shopLists(w.cfg.Articles, w.cfg.PerList, k), 1))), "more " + shopCategoryNames[k]
	case roll < 90:
		return "/", "shop home"
	default:
		return fmt.Sprintf("http://%s/ref/%d/%d", w.Offsite(), h, n), "test report"
	}
}
