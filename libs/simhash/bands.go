package simhash

// MaxNearDistance is the largest distance Bands can find: the bands are
// laid out for it, once for every crawl, so that an index built under one
// threshold serves any threshold up to it.
const MaxNearDistance = 3

// bandBlocks splits a simhash into MaxNearDistance+2 blocks. Two simhashes
// at most MaxNearDistance bits apart differ in at most that many blocks,
// so at least two blocks are equal, and a band (a pair of blocks) matches.
const bandBlocks = MaxNearDistance + 2

// BandCount is the number of bands of a simhash: the pairs of blocks.
const BandCount = bandBlocks * (bandBlocks - 1) / 2

// Band is one key of the near-duplicate index: which pair of blocks, and
// their bits. Two simhashes at most MaxNearDistance bits apart share at
// least one Band; unrelated ones share one with a probability of about
// BandCount / 2^26 (the pairs hold 25 or 26 bits).
type Band struct {
	Index uint8
	Key   uint64
}

// blockShift and blockBits lay the blocks out: 13, 13, 13, 13 and 12 bits.
var blockShift, blockBits = func() (shift, width [bandBlocks]uint) {
	at := uint(0)
	for i := range bandBlocks {
		width[i] = 64 / bandBlocks
		if i < 64%bandBlocks {
			width[i]++
		}
		shift[i] = at
		at += width[i]
	}
	return shift, width
}()

func block(h uint64, i int) uint64 {
	return h >> blockShift[i] & (1<<blockBits[i] - 1)
}

// Bands returns the BandCount bands of h.
func Bands(h uint64) [BandCount]Band {
	var out [BandCount]Band
	n := 0
	for i := range bandBlocks {
		for j := i + 1; j < bandBlocks; j++ {
			out[n] = Band{Index: uint8(n), Key: block(h, i)<<blockBits[j] | block(h, j)}
			n++
		}
	}
	return out
}

// bandShift places a band's number above its bits (at most 26) in Packed.
const bandShift = 56

// Packed is b in one number: its index in the top byte, its key below.
func (b Band) Packed() uint64 { return uint64(b.Index)<<bandShift | b.Key }

// Unpack is the Band that Packed returned p for.
func Unpack(p uint64) Band { return Band{Index: uint8(p >> bandShift), Key: p & (1<<bandShift - 1)} }
