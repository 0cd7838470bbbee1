package console

import (
	"strings"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/doctypes"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
)

// ruleRow is one extraction rule on the crawl's page: the rule as the
// request gives it, the pages it matched and its fields' misses.
type ruleRow struct {
	jobs.ExtractRule
	// InSpec is false for a rule the pages name that the crawl's
	// specification no longer has (a revision changed the rules).
	InSpec bool
	Pages  uint64
	Fields []ruleFieldRow
}

// ruleFieldRow is one field of a rule with the pages of the rule that it
// missed.
type ruleFieldRow struct {
	jobs.ExtractField
	InSpec  bool
	Missing uint64
	Example string // a page the field missed on
	// Broken: the rule matched pages and the field missed on every one:
	// its selector most likely selects nothing on these pages.
	Broken bool
}

// Selector is the field's selector as written: its CSS or its XPath.
func (f ruleFieldRow) Selector() string {
	if f.CSS != "" {
		return f.CSS
	}
	return f.XPath
}

// Takes says what the field takes of what it selects: an attribute, the
// inner HTML or the text; every match or the first; its type.
func (f ruleFieldRow) Takes() string {
	var parts []string
	switch {
	case f.Attr != "":
		parts = append(parts, "@"+f.Attr)
	case f.HTML:
		parts = append(parts, "inner HTML")
	default:
		parts = append(parts, "text")
	}
	if f.List {
		parts = append(parts, "every match")
	}
	if f.Type != "" && f.Type != "string" {
		parts = append(parts, f.Type)
	}
	return strings.Join(parts, ", ")
}

// Share is the part of the rule's pages the field missed, 0 to 1.
func (f ruleFieldRow) Share(pages uint64) float64 {
	if pages == 0 {
		return 0
	}
	return float64(f.Missing) / float64(pages)
}

// ruleRows joins a crawl's rules (in their order; a page takes the first
// that matches) with the counts of its pages (queries.extraction): the
// pages each matched and each field's misses, then the rules and fields
// the pages name that the rules no longer have. noRule is the pages no
// rule matched.
func ruleRows(spec *crawlv1.Extraction, counts []extractCount) (rules []ruleRow, noRule uint64) {
	x := jobs.ExtractionRequest(spec)
	index := map[string]int{}
	if x != nil {
		for _, r := range x.Rules {
			rv := ruleRow{ExtractRule: r, InSpec: true}
			for _, f := range r.Fields {
				rv.Fields = append(rv.Fields, ruleFieldRow{ExtractField: f, InSpec: true})
			}
			index[r.Name] = len(rules)
			rules = append(rules, rv)
		}
	}
	for _, c := range counts {
		if c.Rule == "" {
			if c.Field == "" {
				noRule = c.N
			}
			continue
		}
		i, ok := index[c.Rule]
		if !ok {
			i = len(rules)
			index[c.Rule] = i
			rules = append(rules, ruleRow{ExtractRule: jobs.ExtractRule{Name: c.Rule}})
		}
		r := &rules[i]
		if c.Field == "" {
			r.Pages = c.N
			continue
		}
		j := -1
		for k, f := range r.Fields {
			if f.Name == c.Field {
				j = k
			}
		}
		if j < 0 {
			j = len(r.Fields)
			r.Fields = append(r.Fields, ruleFieldRow{ExtractField: jobs.ExtractField{Name: c.Field}})
		}
		r.Fields[j].Missing, r.Fields[j].Example = c.N, c.Example
	}
	for i := range rules {
		for j := range rules[i].Fields {
			f := &rules[i].Fields[j]
			f.Broken = rules[i].Pages > 0 && f.Missing >= rules[i].Pages
		}
	}
	return rules, noRule
}

// docTypeNames are the spec's document types as people write them (pdf,
// docx, …).
func docTypeNames(d *crawlv1.Documents) []string {
	var out []string
	for _, t := range d.GetContentTypes() {
		out = append(out, doctypes.Short(t))
	}
	return out
}
