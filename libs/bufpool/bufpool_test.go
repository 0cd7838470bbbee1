package bufpool

import (
	"testing"
	"unsafe"
)

func TestGetHasRoom(t *testing.T) {
	for _, n := range []int{0, 1, MinSize - 1, MinSize, MinSize + 1, 20 << 10, 64 << 10, MaxSize - 1, MaxSize, MaxSize + 1, 5 << 20} {
		b := Get(n)
		if len(b) != 0 || cap(b) < n {
			t.Errorf("Get(%d): len %d cap %d, want len 0 and cap >= %d", n, len(b), cap(b), n)
		}
		if n > MaxSize && cap(b) != n {
			t.Errorf("Get(%d) over MaxSize: cap %d, want exactly %d (not rounded up)", n, cap(b), n)
		}
		Put(b)
	}
}

func TestClass(t *testing.T) {
	for _, c := range []struct{ n, class int }{
		{0, 0}, {MinSize, 0}, {MinSize + 1, 1}, {2 * MinSize, 1}, {2*MinSize + 1, 2},
		{MaxSize, classes - 1}, {MaxSize + 1, -1},
	} {
		if got := class(c.n); got != c.class {
			t.Errorf("class(%d) = %d, want %d", c.n, got, c.class)
		}
	}
}

// A buffer given back is handed out again, to a Get it has room for; a
// grown buffer goes to the class its capacity fills, never a larger one.
func TestPutRecycles(t *testing.T) {
	// sync.Pool may drop an item (always under the race detector, at
	// random): try a few times before calling recycling broken.
	for range 100 {
		b := append(Get(10<<10), "page"...)
		Put(b)
		got := Get(9 << 10)
		if cap(got) >= 9<<10 && unsafe.SliceData(got[:1]) == unsafe.SliceData(b) {
			if len(got) != 0 {
				t.Fatalf("recycled buffer has len %d, want 0", len(got))
			}
			return
		}
	}
	t.Fatal("a buffer put back was never handed out again in 100 tries")
}

func TestPutGrownBufferKeepsItsRoom(t *testing.T) {
	odd := make([]byte, 0, 3*MinSize) // between classes 1 and 2
	Put(odd)
	for range 200 {
		b := Get(4 * MinSize) // class 2: must never be odd
		if cap(b) < 4*MinSize {
			t.Fatalf("Get(%d) returned cap %d: a grown buffer was filed in a class it cannot fill", 4*MinSize, cap(b))
		}
	}
}

func TestPutDropsOutOfRange(t *testing.T) {
	Put(make([]byte, 10))           // too small to be worth keeping
	Put(make([]byte, 0, MaxSize*2)) // too large to pin
	if b := Get(1); cap(b) > MaxSize {
		t.Fatalf("Get(1) returned a buffer of cap %d: an oversize buffer was kept", cap(b))
	}
}
