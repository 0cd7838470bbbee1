package robots

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/jimsmart/grobotstxt"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// MaxRulesBytes bounds the patterns kept for one origin (the rules beyond
// it are ignored, as the bytes of a robots.txt beyond MaxBodyBytes are).
const MaxRulesBytes = MaxBodyBytes

// rule is one Allow or Disallow line of the group that applies to the
// agent, its pattern normalized (urlcanon.NormalizePathQuery).
type rule struct {
	allow   bool
	literal bool // no '*', no final '$': a plain prefix
	derived bool // the "/index.htm…" → "/$" allowance, not a line of its own
	pattern string
}

// group is the compiled robots.txt of one origin for one agent: the rules
// of every group naming the agent, or else of every "*" group, as Google's
// matcher (and RFC 9309 §2.2.1) merges them. The rules of other agents are
// not kept.
type group struct {
	specific bool // the rules are the agent's own (else those of "*")
	rules    []rule
}

// compile selects and normalizes the rules of body that apply to agent.
// Rule paths are normalized exactly as URL paths are (RFC 9309 §2.2.2):
// escapes of unreserved characters decoded, hex digits upper-cased, bytes a
// URL may not carry raw percent-encoded; so "/%7Ejoe/" and "/~joe/" are one
// rule, and a lower-case escape such as "%3c" is not lost.
//
// Lower-case escapes are upper-cased in the whole body before grobotstxt
// parses it: its escapePattern upper-cases the hex digits of every escape of
// a pattern with one lower-case digit by clearing bit 0x20, which turns
// digits into control bytes ("%3c" becomes "%\x13C"), so such a rule never
// matched anything.
func compile(body, agent string) (g group, err error) {
	defer func() {
		// grobotstxt's parser has panics left in it; none is known to be
		// reachable (FuzzRules), but untrusted input must not take the
		// fetcher down.
		if p := recover(); p != nil {
			g, err = group{}, fmt.Errorf("parse robots.txt: %v", p)
		}
	}()
	h := &groupHandler{agent: agent}
	grobotstxt.Parse(upperEscapes(body), h)
	if h.everSpecific {
		return group{specific: true, rules: h.specific.rules}, nil
	}
	return group{rules: h.global.rules}, nil
}

// groupHandler collects the rules that apply to agent, tracking groups as
// grobotstxt's RobotsMatcher does: consecutive User-agent lines open one
// group, the first Allow or Disallow line after them closes its list of
// agents, lines before any User-agent line are ignored.
type groupHandler struct {
	agent                string
	inGlobal, inSpecific bool // the current group names "*", names agent
	sawRule              bool // a rule line since the last User-agent line
	everSpecific         bool
	specific, global     ruleList
}

// ruleList is the rules of one kind of group, bounded by MaxRulesBytes:
// once a rule does not fit, it and every later one are ignored.
type ruleList struct {
	rules []rule
	size  int // bytes of patterns kept
	full  bool
}

func (l *ruleList) add(rs ...rule) {
	if l.full {
		return
	}
	n := 0
	for _, r := range rs {
		n += len(r.pattern)
	}
	if l.size+n > MaxRulesBytes {
		l.full = true
		return
	}
	l.size += n
	l.rules = append(l.rules, rs...)
}

func (h *groupHandler) HandleRobotsStart()                     {}
func (h *groupHandler) HandleRobotsEnd()                       {}
func (h *groupHandler) HandleSitemap(int, string)              {}
func (h *groupHandler) HandleUnknownAction(_ int, _, _ string) {}

func (h *groupHandler) HandleUserAgent(_ int, v string) {
	if h.sawRule {
		h.inGlobal, h.inSpecific, h.sawRule = false, false, false
	}
	// "*" followed by a space and more is still the global agent (Google).
	if len(v) >= 1 && v[0] == '*' && (len(v) == 1 || unicode.IsSpace(rune(v[1]))) {
		h.inGlobal = true
		return
	}
	if h.agent != "" && strings.EqualFold(agentToken(v), h.agent) {
		h.inSpecific, h.everSpecific = true, true
	}
}

func (h *groupHandler) HandleAllow(_ int, v string)    { h.add(true, v) }
func (h *groupHandler) HandleDisallow(_ int, v string) { h.add(false, v) }

func (h *groupHandler) add(allow bool, v string) {
	if !h.inGlobal && !h.inSpecific {
		return
	}
	h.sawRule = true
	p := patternForm(v)
	rs := []rule{newRule(allow, p, false)}
	if allow {
		// Google's matcher: "Allow: /d/index.htm[l]" also allows "/d/".
		if s := strings.LastIndexByte(p, '/'); s >= 0 && strings.HasPrefix(p[s:], "/index.htm") {
			rs = append(rs, newRule(true, p[:s+1]+"$", true))
		}
	}
	if h.inSpecific {
		h.specific.add(rs...)
	} else {
		h.global.add(rs...)
	}
}

func newRule(allow bool, pattern string, derived bool) rule {
	literal := !strings.ContainsRune(pattern, '*') && !strings.HasSuffix(pattern, "$")
	return rule{allow: allow, literal: literal, derived: derived, pattern: pattern}
}

// agentToken is the part of a User-agent line's value that grobotstxt
// compares with the agent: its leading run of RFC 7231 token characters.
func agentToken(v string) string {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("~#$%'*+-.^_`|", c) >= 0 {
			continue
		}
		return v[:i]
	}
	return v
}

// upperEscapes upper-cases the hex digits of every percent-escape of s
// (see compile); it returns s itself when there is none to change.
func upperEscapes(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b []byte
	for ; i+2 < len(s); i++ {
		if s[i] == '%' && isHex(s[i+1]) && isHex(s[i+2]) && (isLowerHex(s[i+1]) || isLowerHex(s[i+2])) {
			if b == nil {
				b = []byte(s)
			}
			b[i+1], b[i+2] = upper(s[i+1]), upper(s[i+2])
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isLowerHex(c byte) bool { return 'a' <= c && c <= 'f' }

func upper(c byte) byte {
	if isLowerHex(c) {
		return c - 'a' + 'A'
	}
	return c
}

// verdict applies g to the normalized path and query of a URL: the
// longest matching pattern wins, Allow wins a tie, no match (or only empty
// patterns) allows, as grobotstxt's RobotsMatcher decides.
func (g group) verdict(path string) Verdict {
	allow, disallow := -1, -1
	for _, r := range g.rules {
		n := len(r.pattern)
		if r.allow && n <= allow || !r.allow && n <= disallow {
			continue // cannot raise the priority
		}
		var ok bool
		if r.literal {
			ok = strings.HasPrefix(path, r.pattern)
		} else {
			ok = grobotstxt.Matches(path, r.pattern)
		}
		if !ok {
			continue
		}
		if r.allow {
			allow = n
		} else {
			disallow = n
		}
	}
	if (allow > 0 || disallow > 0) && disallow > allow {
		return Denied
	}
	return Allowed
}

// text returns g in robots.txt syntax: one User-agent line (agent, or "*"
// when the rules are those of the global group) and the rules in order. A
// group compiled from it for the same agent is g again.
func (g group) text(agent string) string {
	var b strings.Builder
	b.WriteString("User-agent: ")
	if g.specific {
		b.WriteString(agent)
	} else {
		b.WriteString("*")
	}
	b.WriteByte('\n')
	for _, r := range g.rules {
		if r.derived {
			continue
		}
		if r.allow {
			b.WriteString("Allow: ")
		} else {
			b.WriteString("Disallow: ")
		}
		b.WriteString(r.pattern)
		b.WriteByte('\n')
	}
	return b.String()
}

// size is the memory g holds, roughly, for the cache's bound.
func (g group) size() int64 {
	n := int64(0)
	for _, r := range g.rules {
		n += int64(len(r.pattern)) + 32
	}
	return n
}

// patternForm is the form a rule path is compared in: normalized as a
// URL's path and query (urlcanon.NormalizePathQuery), its '*' wildcards and
// final '$' anchor kept, and a '$' anywhere else, which Google's matcher
// takes literally, written "%24" as a URL's own '$' is (see matchPath).
func patternForm(v string) string {
	p := urlcanon.NormalizePathQuery(v)
	i := strings.IndexByte(p, '$')
	if i < 0 || i == len(p)-1 {
		return p
	}
	var b strings.Builder
	b.Grow(len(p) + 8)
	for j := 0; j < len(p); j++ {
		if p[j] == '$' && j < len(p)-1 {
			b.WriteString("%24")
			continue
		}
		b.WriteByte(p[j])
	}
	return b.String()
}

// matchPath returns the path and query of rawURL (fragment dropped) in the
// form rule patterns are compiled to: urlcanon.NormalizePathQuery, then its
// '*' and '$' written "%2A" and "%24", because in a pattern they are the
// wildcard and the end anchor and a rule names them literally by their
// escapes (RFC 9309 §2.2.3: "/path/file-with-a-%2A.html" matches
// "/path/file-with-a-*.html"). The fetcher's URLs are canonical already;
// normalizing again makes every spelling of a URL meet the same rules.
func matchPath(rawURL string) string {
	s := rawURL
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		j := strings.IndexAny(rest, "/?")
		if j < 0 {
			return "/"
		}
		s = rest[j:]
	}
	if !strings.HasPrefix(s, "/") {
		s = "/" + s
	}
	s = urlcanon.NormalizePathQuery(s)
	if !strings.ContainsAny(s, "*$") {
		return s
	}
	return strings.NewReplacer("*", "%2A", "$", "%24").Replace(s)
}
