package kafkaio

import (
	"fmt"

	"github.com/trawl-crawler/trawl/libs/urlcanon"
)

// Key returns the record key of a URL: its politeness key (urlcanon).
func Key(rawURL string) ([]byte, error) {
	k, err := urlcanon.PolitenessKey(rawURL)
	if err != nil {
		return nil, fmt.Errorf("key url: %w", err)
	}
	return []byte(k), nil
}

// PartitionFor returns the partition a key lands on among n partitions:
// Kafka's default murmur2 partitioner (kafka-go's Murmur2Balancer), the same
// that the Java client and librdkafka's murmur2 use:
// toPositive(murmur2(key)) % n. A nil key hashes like an empty key (the
// Writer's balancer is configured Consistent, so it agrees). n must be > 0.
func PartitionFor(key []byte, n int) int {
	return int((murmur2(key) & 0x7fffffff) % uint32(n))
}

// murmur2 is the Java client's Utils.murmur2 (seed 0x9747b28c), as ported
// by kafka-go's Murmur2Balancer.
func murmur2(data []byte) uint32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	length := len(data)
	h := seed ^ uint32(length)
	n4 := length / 4
	for i := 0; i < n4; i++ {
		i4 := i * 4
		k := uint32(data[i4]) | uint32(data[i4+1])<<8 | uint32(data[i4+2])<<16 | uint32(data[i4+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	tail := data[n4*4:]
	switch len(tail) {
	case 3:
		h ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(tail[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
