package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValue(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hits_total", Help: "h"}, []string{"table"})
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "depth", Help: "d"}, []string{"topic"})
	plain := prometheus.NewCounter(prometheus.CounterOpts{Name: "plain_total", Help: "p"})
	reg.MustRegister(c, g, plain)
	plain.Add(5)
	c.WithLabelValues("a").Add(3)
	c.WithLabelValues("b").Inc()
	g.WithLabelValues("fetch").Set(7)
	for _, tt := range []struct {
		name, label, value string
		want               float64
	}{
		{"hits_total", "table", "a", 3},
		{"hits_total", "table", "b", 1},
		{"hits_total", "table", "c", 0},
		{"depth", "topic", "fetch", 7},
		{"missing", "topic", "fetch", 0},
		{"plain_total", "", "", 5},
		{"hits_total", "", "", 0}, // labelled: no series without labels
	} {
		if got := Value(t, reg, tt.name, tt.label, tt.value); got != tt.want {
			t.Errorf("Value(%s{%s=%s}) = %v, want %v", tt.name, tt.label, tt.value, got, tt.want)
		}
	}
}
