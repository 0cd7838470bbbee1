package kafkaembed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
)

// MaxRequestBytes is the largest Kafka request the embedded broker reads,
// Kafka's own socket.request.max.bytes (100 MiB). kfake allocates whatever
// size a request's 4-byte length prefix claims before it reads the body, so
// a stray HTTP request ("GET " reads as 1.2 GB) or any other non-Kafka
// client made it allocate gigabytes and wait for them; the guard closes
// such a connection instead.
const MaxRequestBytes = 100 << 20

// ErrRequestTooLarge is the read error of a connection whose next request
// claims more than MaxRequestBytes (or a negative size).
var ErrRequestTooLarge = errors.New("kafka request over the size limit (not a Kafka client?)")

// guardListener wraps every accepted connection in a frameGuard.
type guardListener struct {
	net.Listener
	limit   int64
	refused *atomic.Int64 // connections closed for an oversized request
}

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &frameGuard{Conn: c, limit: l.limit, refused: l.refused}, nil
}

// frameGuard follows the request framing of a Kafka connection (a 4-byte
// big-endian length, then that many bytes) as the broker reads it, and
// fails the read that would complete a length over limit: the broker never
// sees that length, so it allocates nothing for it, and closes the
// connection on the error. Used by one reader (the broker's read loop).
type frameGuard struct {
	net.Conn
	limit   int64
	refused *atomic.Int64

	hdr  [4]byte
	hdrN int   // bytes of the next length prefix seen so far
	body int64 // bytes of the current request's body still to come
	err  error // sticky: the connection refused an oversized request
}

func (g *frameGuard) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.Conn.Read(p)
	if ok, bad := g.scan(p[:n]); bad != nil {
		g.err = fmt.Errorf("read from %s: %w", g.RemoteAddr(), bad)
		g.refused.Add(1)
		_ = g.Close() // the broker closes it too on the error
		if ok == 0 {
			return 0, g.err
		}
		return ok, nil // the requests before the oversized one; the error comes next
	}
	return n, err
}

// scan advances the framing over b, which the broker is about to read. It
// returns how many leading bytes of b may be read and, when a length prefix
// completed in b claims too much, the error. The bytes of that prefix
// already read by an earlier Read are harmless: the broker waits for the
// rest of the prefix, and gets the error.
func (g *frameGuard) scan(b []byte) (int, error) {
	for i := 0; i < len(b); {
		if g.body > 0 {
			skip := int(min(g.body, int64(len(b)-i)))
			g.body -= int64(skip)
			i += skip
			continue
		}
		start := i - g.hdrN // where this prefix began in b (negative: in an earlier read)
		g.hdr[g.hdrN] = b[i]
		g.hdrN++
		i++
		if g.hdrN < len(g.hdr) {
			continue
		}
		g.hdrN = 0
		size := int64(int32(binary.BigEndian.Uint32(g.hdr[:])))
		if size < 0 || size > g.limit {
			return max(start, 0), fmt.Errorf("request of %d bytes, limit %d: %w", size, g.limit, ErrRequestTooLarge)
		}
		g.body = size
	}
	return len(b), nil
}
