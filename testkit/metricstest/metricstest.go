// Package metricstest reads the series of a Prometheus registry in tests,
// by name and label, as a dashboard would: a test asserts on what is
// exported, not on a component's fields.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Value returns the value of the counter or gauge name{label=value}
// gathered from g (label "": the metric without labels), 0 when there is
// no such series.
func Value(t testing.TB, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			matched := label == "" && len(m.GetLabel()) == 0
			for _, l := range m.GetLabel() {
				matched = matched || l.GetName() == label && l.GetValue() == value
			}
			if !matched {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
