package kafkaio

import (
	"fmt"
	"testing"

	"github.com/segmentio/kafka-go"
)

func TestMurmur2JavaVectors(t *testing.T) {
	// Vectors of the Java client's Utils.murmur2, as published in
	// librdkafka's rdmurmur2.c and kafka-go's balancer tests.
	tests := []struct {
		key  string
		want uint32
	}{
		{"kafka", 0xd067cf64},
		{"giberish123456789", 0x8f552b0c},
		{"1234", 0x9fc97b14},
		{"234", 0xe7c009ca},
		{"34", 0x873930da},
		{"4", 0x5a4b5ca1},
		{"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424f1c},
		{"reAmbleWillBeRemoved,ThePrePartThatIs", 0x4a62b377},
		{"eAmbleWillBeRemoved,ThePrePartThatIs", 0xe0e4e09e},
		{"AmbleWillBeRemoved,ThePrePartThatIs", 0x62b8b43f},
		{"", 0x106e08d9},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			if got := murmur2([]byte(tt.key)); got != tt.want {
				t.Errorf("murmur2(%q) = %#x, want %#x", tt.key, got, tt.want)
			}
		})
	}
}

func TestPartitionForKnownValues(t *testing.T) {
	// Partitions chosen by the Java / kafka-python / librdkafka murmur2
	// partitioners for these keys (kafka-python's test_partitioner.py with
	// 1000 partitions; librdkafka's 0048-partitioner.c hashes mod 17).
	tests := []struct {
		key  []byte
		n    int
		want int
	}{
		{[]byte(""), 1000, 681},
		{[]byte("a"), 1000, 524},
		{[]byte("ab"), 1000, 434},
		{[]byte("abc"), 1000, 107},
		{[]byte("123456789"), 1000, 566},
		{[]byte{0, 32}, 1000, 742},
		{[]byte("23456"), 17, 0x058d780f % 17},
		{[]byte("this is another string with more length to it perhaps"), 17, 0x4f7703da % 17},
		{[]byte("hejsan"), 17, 0x5ec19395 % 17},
		{nil, 1000, 681}, // nil hashes like empty
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q/%d", tt.key, tt.n), func(t *testing.T) {
			if got := PartitionFor(tt.key, tt.n); got != tt.want {
				t.Errorf("PartitionFor(%q, %d) = %d, want %d", tt.key, tt.n, got, tt.want)
			}
		})
	}
}

// TestPartitionForMatchesWriterBalancer checks PartitionFor against the
// balancer the Writer uses, for many keys and partition counts.
func TestPartitionForMatchesWriterBalancer(t *testing.T) {
	b := kafka.Murmur2Balancer{Consistent: true}
	for _, n := range []int{1, 2, 3, 7, 32, 100, 1000} {
		parts := make([]int, n)
		for i := range parts {
			parts[i] = i
		}
		for i := range 2000 {
			key := []byte(fmt.Sprintf("host-%d.example.com", i))
			if got, want := PartitionFor(key, n), b.Balance(kafka.Message{Key: key}, parts...); got != want {
				t.Fatalf("PartitionFor(%q, %d) = %d, balancer says %d", key, n, got, want)
			}
		}
	}
}

func FuzzPartitionFor(f *testing.F) {
	f.Add([]byte("example.com"), uint16(32))
	f.Add([]byte{}, uint16(1))
	b := kafka.Murmur2Balancer{Consistent: true}
	f.Fuzz(func(t *testing.T, key []byte, n16 uint16) {
		n := int(n16%1024) + 1
		parts := make([]int, n)
		for i := range parts {
			parts[i] = i
		}
		got := PartitionFor(key, n)
		if got < 0 || got >= n {
			t.Fatalf("PartitionFor = %d outside [0, %d)", got, n)
		}
		if want := b.Balance(kafka.Message{Key: key}, parts...); got != want {
			t.Fatalf("PartitionFor(%q, %d) = %d, balancer says %d", key, n, got, want)
		}
	})
}

func BenchmarkPartitionFor(b *testing.B) {
	key := []byte("www.example.com")
	for b.Loop() {
		PartitionFor(key, 32)
	}
}
