package backpressure

import (
	"testing"

	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// TestProgress: the lag sums the partitions; a group that never committed
// (no next stage, or none taken yet) holds nothing back.
func TestProgress(t *testing.T) {
	for _, tt := range []struct {
		name                string
		parts               []kafkaio.PartitionOffsets
		wantProduced, taken int64
	}{
		{"committed", []kafkaio.PartitionOffsets{{End: 100, Committed: 40}, {First: 10, End: 50, Committed: -1}}, 150, 50},
		{"never committed", []kafkaio.PartitionOffsets{{End: 100, Committed: -1}, {End: 50, Committed: -1}}, 150, 150},
		{"empty", nil, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if p, k := Progress(tt.parts); p != tt.wantProduced || k != tt.taken {
				t.Errorf("Progress = %d produced, %d taken; want %d, %d", p, k, tt.wantProduced, tt.taken)
			}
		})
	}
}
