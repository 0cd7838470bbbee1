package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"
)

var funcs = template.FuncMap{
	"fld":       fld,
	"crawlPath": crawlPath,
	"hostPath": func(id, host string) string {
		return crawlPath(id) + "/hosts/" + url.PathEscape(host)
	},
	"storyPath": func(id, u string) string {
		return crawlPath(id) + "/url?u=" + url.QueryEscape(u)
	},
	"time": func(t time.Time) string {
		if t.IsZero() || t.Unix() <= 0 {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	// deref is the time a pointer holds (zero for nil).
	"deref": func(t *time.Time) time.Time {
		if t == nil {
			return time.Time{}
		}
		return *t
	},
	"clock": func(t time.Time) string {
		if t.IsZero() || t.Unix() <= 0 {
			return "–"
		}
		return t.UTC().Format("15:04:05.000")
	},
	"dur": func(d time.Duration) string {
		if d >= time.Minute {
			return d.Round(time.Second).String()
		}
		return d.Round(time.Millisecond).String()
	},
	"ms": func(ms int64) string {
		if ms < 0 {
			return "–"
		}
		return (time.Duration(ms) * time.Millisecond).String()
	},
	"pct": func(f float64) string { return fmt.Sprintf("%.0f", f*100) },
	"f1":  func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"f2":  func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"errs": func(e formErrors, field string) []string {
		return e[field]
	},
	"fid": func(field string) string { return "f-" + strings.ReplaceAll(field, ".", "-") },
	// prettyJSON indents a JSON value stored as text (documents.fields,
	// properties); text that is no JSON is shown as it is.
	"prettyJSON": func(s string) string {
		var b bytes.Buffer
		if err := json.Indent(&b, []byte(s), "", "  "); err != nil {
			return s
		}
		return b.String()
	},
	"join": strings.Join,
	"statusClass": func(code uint16, kind string) string {
		switch {
		case kind != "" && kind != "budget_exhausted":
			return "bad"
		case code >= 500 || code == 429:
			return "bad"
		case code >= 400:
			return "warn"
		}
		return ""
	},
}

// fieldView is one form field as the "field" template renders it.
type fieldView struct {
	Name, Label, Kind, Hint, Value string
	Checked                        bool
	Errors                         []string
}

// ID is the field's element id.
func (f fieldView) ID() string { return "f-" + strings.ReplaceAll(f.Name, ".", "-") }

func fld(d formData, name, label, kind, hint string) fieldView {
	return fieldView{Name: name, Label: label, Kind: kind, Hint: hint, Value: d.V.Get(name), Checked: d.V.Get(name) != "",
		Errors: d.Errors[name]}
}
