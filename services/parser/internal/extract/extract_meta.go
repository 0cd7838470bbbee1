package extract

import (
	"strings"
	"unicode"

	"github.com/PuerkitoBio/goquery"
)

// ParseRobotsDirectives reads a robots meta content or X-Robots-Tag value
// ("noindex, nofollow", "none", "all"). Unknown tokens are ignored.
func ParseRobotsDirectives(content string) (nofollow, noindex bool) {
	for _, tok := range strings.FieldsFunc(strings.ToLower(content), func(r rune) bool {
		return r == ',' || unicode.IsSpace(r)
	}) {
		switch tok {
		case "nofollow":
			nofollow = true
		case "noindex":
			noindex = true
		case "none":
			nofollow, noindex = true, true
		}
	}
	return nofollow, noindex
}

func language(root *goquery.Selection) string {
	h := root.Find("html").First()
	lang, ok := h.Attr("lang")
	if !ok || strings.TrimSpace(lang) == "" {
		lang, _ = h.Attr("xml:lang")
	}
	return normLanguage(lang)
}

// normLanguage is a language attribute lower-cased, or "" if it is not a
// plausible language tag.
func normLanguage(lang string) string {
	lang = strings.ToLower(strings.TrimSpace(lang))
	if len(lang) > maxLanguageBytes || strings.IndexFunc(lang, func(r rune) bool {
		return !(r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) >= 0 {
		return ""
	}
	return lang
}

// title is the text of the first HTML <title> (not an SVG one).
func title(root *goquery.Selection) string {
	var t string
	root.Find("title").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		if n := s.Get(0); n.Namespace != "" {
			return true
		}
		t = collapse(s.Nodes, maxTitleBytes)
		return false
	})
	return t
}

// metaContent is the collapsed content of the first <meta name=name>.
func metaContent(root *goquery.Selection, name string, limit int) string {
	var out string
	root.Find("meta[name][content]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		n, _ := s.Attr("name")
		if !strings.EqualFold(strings.TrimSpace(n), name) {
			return true
		}
		c, _ := s.Attr("content")
		out = collapseString(c, limit)
		return false
	})
	return out
}

// RefreshURL returns the URL of a meta refresh content ("5; url=next.html",
// "0;URL='x'"), parsed as browsers do; ok is false when there is none.
func RefreshURL(content string) (string, bool) {
	s := strings.TrimLeft(content, " \t\n\f\r")
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	if i == 0 {
		return "", false
	}
	s = strings.TrimLeft(s[i:], " \t\n\f\r")
	if s == "" || (s[0] != ';' && s[0] != ',') {
		return "", false
	}
	s = strings.TrimLeft(s[1:], " \t\n\f\r")
	if len(s) >= 3 && strings.EqualFold(s[:3], "url") {
		rest := strings.TrimLeft(s[3:], " \t\n\f\r")
		if strings.HasPrefix(rest, "=") {
			s = strings.TrimLeft(rest[1:], " \t\n\f\r")
		}
	}
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		s = s[1:]
		if j := strings.IndexByte(s, q); j >= 0 {
			s = s[:j]
		}
	}
	s = strings.TrimSpace(s)
	return s, s != ""
}

func metaRobots(root *goquery.Selection) (nofollow, noindex bool) {
	root.Find("meta[name][content]").Each(func(_ int, s *goquery.Selection) {
		name, _ := s.Attr("name")
		if !strings.EqualFold(strings.TrimSpace(name), "robots") {
			return
		}
		content, _ := s.Attr("content")
		f, i := ParseRobotsDirectives(content)
		nofollow, noindex = nofollow || f, noindex || i
	})
	return nofollow, noindex
}
