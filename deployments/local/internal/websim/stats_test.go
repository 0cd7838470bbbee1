package websim

import (
	"testing"
	"time"
)

func TestQuarterRates(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		window   time.Duration
		timeline []int
		want     [4]float64
	}{
		{"empty window", 0, []int{5}, [4]float64{}},
		// 4 s window, quarters of 1 s = 10 slots each.
		{"steady", 4 * time.Second, repeat(40, 2), [4]float64{20, 20, 20, 20}},
		{"slowing", 4 * time.Second, append(append(repeat(20, 4), repeat(10, 2)...), repeat(10, 1)...), [4]float64{40, 40, 20, 10}},
		// the last page lands in the slot that starts at the window's end
		{"last slot", 4 * time.Second, append(repeat(40, 0), 1), [4]float64{0, 0, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Stats{First: t0, LastPage: t0.Add(tt.window), PageTimeline: tt.timeline}
			if got := s.QuarterRates(); got != tt.want {
				t.Errorf("QuarterRates() = %v, want %v", got, tt.want)
			}
		})
	}
}

// repeat returns n slots of v pages each.
func repeat(n, v int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}
