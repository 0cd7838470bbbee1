package console

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"
)

// chart is a line chart drawn as inline SVG on the server: no script, no
// library, readable by a screen reader through its title and the table
// the page renders next to it.
type chart struct {
	Title   string
	Unit    string
	Times   []time.Time
	Series  []line
	Maximum float64
}

type line struct {
	Name   string
	Class  string // the CSS class that colours it (c0…c7)
	Values []float64
}

const (
	chartW, chartH = 640.0, 180.0
	padL, padB     = 48.0, 22.0
	padT, padR     = 8.0, 8.0
)

// SVG draws the chart.
func (c chart) SVG() template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s" preserveAspectRatio="none">`,
		chartW, chartH, template.HTMLEscapeString(c.Title))
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(c.Title))
	top := c.Maximum
	for _, s := range c.Series {
		for _, v := range s.Values {
			top = math.Max(top, v)
		}
	}
	if top <= 0 {
		top = 1
	}
	top = niceCeil(top)
	plotW, plotH := chartW-padL-padR, chartH-padT-padB
	for i := 0; i <= 4; i++ {
		y := padT + plotH*float64(i)/4
		fmt.Fprintf(&b, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/>`, padL, y, chartW-padR, y)
		fmt.Fprintf(&b, `<text class="axis" x="%g" y="%.1f" text-anchor="end">%s</text>`, padL-4, y+4, short(top*float64(4-i)/4))
	}
	n := len(c.Times)
	if n > 0 {
		fmt.Fprintf(&b, `<text class="axis" x="%g" y="%g">%s</text>`, padL, chartH-6, c.Times[0].Format("15:04:05"))
		fmt.Fprintf(&b, `<text class="axis" x="%g" y="%g" text-anchor="end">%s</text>`, chartW-padR, chartH-6, c.Times[n-1].Format("15:04:05"))
	}
	x := func(i int) float64 {
		if n <= 1 {
			return padL + plotW/2
		}
		return padL + plotW*float64(i)/float64(n-1)
	}
	for _, s := range c.Series {
		var pts []string
		for i, v := range s.Values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), padT+plotH*(1-v/top)))
		}
		if len(pts) == 1 {
			fmt.Fprintf(&b, `<circle class="%s" cx="%s" r="3"/>`, s.Class, strings.Replace(pts[0], ",", `" cy="`, 1))
			continue
		}
		fmt.Fprintf(&b, `<polyline class="%s" points="%s"/>`, s.Class, strings.Join(pts, " "))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped strings above
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// charts builds the crawl page's three charts from the series.
func charts(pts []point, kinds []kindPoint, bucket time.Duration) []chart {
	sec := bucket.Seconds()
	times := make([]time.Time, len(pts))
	idx := make(map[time.Time]int, len(pts))
	rate := line{Name: "attempts/s", Class: "c0"}
	status := []line{{Name: "2xx", Class: "c1"}, {Name: "3xx", Class: "c2"}, {Name: "4xx", Class: "c3"}, {Name: "5xx", Class: "c4"}, {Name: "error", Class: "c5"}}
	for i, p := range pts {
		times[i] = p.T
		idx[p.T] = i
		rate.Values = append(rate.Values, float64(p.All)/sec)
		for j, v := range []uint64{p.S2xx, p.S3xx, p.S4xx, p.S5xx, p.Errors} {
			status[j].Values = append(status[j].Values, float64(v))
		}
	}
	byKind := map[string][]float64{}
	for _, k := range kinds {
		i, ok := idx[k.T]
		if !ok {
			continue
		}
		if byKind[k.Kind] == nil {
			byKind[k.Kind] = make([]float64, len(pts))
		}
		byKind[k.Kind][i] = float64(k.N)
	}
	names := make([]string, 0, len(byKind))
	for k := range byKind {
		names = append(names, k)
	}
	sort.Strings(names)
	var errLines []line
	for i, k := range names {
		errLines = append(errLines, line{Name: k, Class: fmt.Sprintf("c%d", (i+3)%8), Values: byKind[k]})
	}
	per := "per " + bucket.String()
	return []chart{
		{Title: "Fetch attempts per second", Unit: "/s", Times: times, Series: []line{rate}},
		{Title: "Status codes, attempts " + per, Times: times, Series: status},
		{Title: "Errors by kind, attempts " + per, Times: times, Series: errLines},
	}
}
