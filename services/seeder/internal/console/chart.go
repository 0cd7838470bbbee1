package console

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
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
	return template.HTML(b.String()) // built from numbers and escaped strings above
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
		return short(v/1e6) + "M"
	case v >= 1e3:
		return short(v/1e3) + "k"
	}
	return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
}

// charts builds the crawl page's three charts from the series of the
// window [from, to]: every bucket of the window is a point (zero when no
// attempt fell in it), and the rate of the last, partial bucket is over
// its elapsed part.
func charts(pts []point, kinds []kindPoint, from, to time.Time, bucket time.Duration) []chart {
	if len(pts) > 0 && pts[0].T.Before(from) {
		from = pts[0].T // a fetcher's clock behind the seeder's
	}
	byT := make(map[int64]point, len(pts))
	for _, p := range pts {
		byT[p.T.Unix()] = p
	}
	b := int64(bucket / time.Second)
	first, last := from.Unix()/b*b, to.Unix()/b*b
	if last-first > b*(maxChartPoints+1) {
		first = last - b*(maxChartPoints+1)
	}
	var times []time.Time
	idx := map[int64]int{}
	rate := line{Name: "attempts/s", Class: "c0"}
	status := []line{{Name: "2xx", Class: "c1"}, {Name: "3xx", Class: "c2"}, {Name: "4xx", Class: "c3"}, {Name: "5xx", Class: "c4"}, {Name: "error", Class: "c5"}}
	for t := first; t <= last; t += b {
		p := byT[t]
		idx[t] = len(times)
		times = append(times, time.Unix(t, 0).UTC())
		secs := bucket.Seconds()
		if end := time.Unix(t+b, 0); end.After(to) {
			secs = max(1, to.Sub(time.Unix(t, 0)).Seconds())
		}
		rate.Values = append(rate.Values, float64(p.All)/secs)
		for j, v := range []uint64{p.S2xx, p.S3xx, p.S4xx, p.S5xx, p.Errors} {
			status[j].Values = append(status[j].Values, float64(v))
		}
	}
	byKind := map[string][]float64{}
	for _, k := range kinds {
		i, ok := idx[k.T.Unix()]
		if !ok {
			continue
		}
		if byKind[k.Kind] == nil {
			byKind[k.Kind] = make([]float64, len(times))
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
