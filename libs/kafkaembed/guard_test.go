package kafkaembed

import (
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"testing"
)

// frame returns a request frame: a big-endian length, then body.
func frame(body string) string {
	return string(binary.BigEndian.AppendUint32(nil, uint32(len(body)))) + body
}

// TestFrameGuardScan feeds byte streams to a frameGuard in given pieces
// (as successive reads) and checks how many bytes each read lets through
// and whether it refuses. Invariant: a refused length prefix is never
// wholly passed to the reader.
func TestFrameGuardScan(t *testing.T) {
	oversized := string(binary.BigEndian.AppendUint32(nil, 1001))
	negative := string(binary.BigEndian.AppendUint32(nil, 0x80000000))
	tests := []struct {
		name   string
		reads  []string
		passed []int // bytes each read lets through
		refuse bool  // the last read refuses
	}{
		{"one frame", []string{frame("hello")}, []int{9}, false},
		{"two frames in one read", []string{frame("a") + frame("bc")}, []int{11}, false},
		{"prefix split over reads", []string{frame("abc")[:2], frame("abc")[2:]}, []int{2, 5}, false},
		{"body split over reads", []string{frame("abcdef")[:6], frame("abcdef")[6:]}, []int{6, 4}, false},
		{"empty body", []string{frame("") + frame("x")}, []int{9}, false},
		{"at the limit", []string{frame(string(make([]byte, 1000)))}, []int{1004}, false},
		{"http request", []string{"GET / HTTP/1.1\r\n"}, []int{0}, true},
		{"over the limit", []string{oversized + "xx"}, []int{0}, true},
		{"negative size", []string{negative}, []int{0}, true},
		{"oversized after a frame", []string{frame("ok") + oversized}, []int{6}, true},
		{"oversized prefix split", []string{frame("ok") + oversized[:2], oversized[2:]}, []int{8, 0}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &frameGuard{limit: 1000, refused: new(atomic.Int64)}
			var err error
			for i, r := range tt.reads {
				var n int
				n, err = g.scan([]byte(r))
				if n != tt.passed[i] {
					t.Errorf("read %d lets %d bytes through, want %d", i, n, tt.passed[i])
				}
			}
			if refused := errors.Is(err, ErrRequestTooLarge); refused != tt.refuse {
				t.Errorf("refused = %v (%v), want %v", refused, err, tt.refuse)
			}
		})
	}
}

// TestFrameGuardRead checks Read on a real connection: the frames before
// an oversized request are read, then the error, which sticks.
func TestFrameGuardRead(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	refused := new(atomic.Int64)
	g := &frameGuard{Conn: server, limit: 100, refused: refused}
	go func() {
		_, _ = client.Write([]byte(frame("ok") + "GET / HTTP/1.1\r\n"))
	}()
	buf := make([]byte, 64)
	n, err := g.Read(buf)
	if err != nil || string(buf[:n]) != frame("ok") {
		t.Fatalf("first read = %q, %v; want the frame before the HTTP request", buf[:n], err)
	}
	for range 2 {
		if _, err := g.Read(buf); !errors.Is(err, ErrRequestTooLarge) {
			t.Fatalf("read = %v, want ErrRequestTooLarge", err)
		}
	}
	if got := refused.Load(); got != 1 {
		t.Errorf("refused = %d, want 1", got)
	}
}

// FuzzFrameGuard feeds a byte stream to a frameGuard whole and in chunks.
// Invariants: scan never panics; how many bytes pass before a refusal, and
// whether the stream is refused, do not depend on how it was split into
// reads; when it is refused, the bytes passed end before the refused
// length prefix is complete.
func FuzzFrameGuard(f *testing.F) {
	f.Add([]byte(frame("ok")+"GET / HTTP/1.1\r\n"), uint8(3))
	f.Add([]byte(frame("hello")+frame("")+frame("x")), uint8(1))
	f.Add([]byte{0, 0, 0, 200, 1, 2, 3}, uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		whole := &frameGuard{limit: 100, refused: new(atomic.Int64)}
		wholeN, wholeErr := whole.scan(data)

		split := &frameGuard{limit: 100, refused: new(atomic.Int64)}
		var splitN int
		var splitErr error
		for i := 0; i < len(data) && splitErr == nil; {
			j := min(len(data), i+int(chunk)+1)
			var n int
			n, splitErr = split.scan(data[i:j])
			splitN += n
			i = j
		}
		if (wholeErr == nil) != (splitErr == nil) {
			t.Fatalf("whole refused %v, split refused %v", wholeErr, splitErr)
		}
		if wholeErr == nil {
			if wholeN != len(data) || splitN != len(data) {
				t.Fatalf("accepted stream: passed %d whole, %d split, of %d", wholeN, splitN, len(data))
			}
			return
		}
		// Refused: the split reads may have passed the start of the
		// refused prefix (it began in an earlier read), never all of it.
		if splitN < wholeN || splitN > wholeN+3 {
			t.Fatalf("refused stream: passed %d whole, %d split", wholeN, splitN)
		}
	})
}
