package httpfetch

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
)

// AcceptEncoding is the Accept-Encoding header sent: every coding that
// decodeBody understands.
const AcceptEncoding = "gzip, deflate, br, zstd"

// bombRatio is the decoded/received ratio above which a body that decodes
// past the cap is a decompression bomb rather than a large page (text
// compresses about 5-10x; bombs compress 1000x).
const bombRatio = 100

// zstdMaxWindow bounds the memory a zstd frame may make the decoder use.
const zstdMaxWindow = 8 << 20

// errUnsupportedEncoding marks a Content-Encoding we cannot decode.
var errUnsupportedEncoding = errors.New("unsupported content-encoding")

// countingReader counts the bytes read through it (the bytes on the wire,
// before content decoding); n is read by the rate watchdog concurrently.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// decodeBody returns a reader of the body decoded according to the
// Content-Encoding header (codings applied in order, so decoded in reverse)
// and a function releasing the decoders.
func decodeBody(contentEncoding string, r io.Reader) (io.Reader, func(), error) {
	var closers []func()
	release := func() {
		for _, c := range closers {
			c()
		}
	}
	codings := strings.Split(contentEncoding, ",")
	for i := len(codings) - 1; i >= 0; i-- {
		switch c := strings.ToLower(strings.TrimSpace(codings[i])); c {
		case "", "identity":
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(r)
			if err != nil {
				release()
				return nil, func() {}, fmt.Errorf("open gzip body: %w", err)
			}
			closers = append(closers, func() { _ = zr.Close() })
			r = zr
		case "deflate":
			// RFC 9110 deflate is zlib-wrapped; some servers send raw
			// deflate. Tell them apart by the zlib header.
			br := bufio.NewReader(r)
			if hdr, err := br.Peek(2); err == nil && isZlibHeader(hdr) {
				zr, err := zlib.NewReader(br)
				if err != nil {
					release()
					return nil, func() {}, fmt.Errorf("open deflate body: %w", err)
				}
				closers = append(closers, func() { _ = zr.Close() })
				r = zr
			} else {
				fr := flate.NewReader(br)
				closers = append(closers, func() { _ = fr.Close() })
				r = fr
			}
		case "br":
			r = brotli.NewReader(r)
		case "zstd":
			zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(zstdMaxWindow),
				zstd.WithDecoderLowmem(true))
			if err != nil {
				release()
				return nil, func() {}, fmt.Errorf("open zstd body: %w", err)
			}
			closers = append(closers, zr.Close)
			r = zr
		default:
			release()
			return nil, func() {}, fmt.Errorf("decode %q: %w", c, errUnsupportedEncoding)
		}
	}
	return r, release, nil
}

func isZlibHeader(h []byte) bool {
	return h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0
}

// rateWatch cancels a download whose transfer rate over a window falls
// below a minimum: a server trickling bytes would otherwise hold a worker
// until the total timeout. Stop must be called; it waits for the watchdog.
type rateWatch struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

// watchRate starts the watchdog over the bytes counted by c. cancel is
// called with failure.ErrTooSlow when fewer than minRate*window bytes
// arrived during a window. A zero minRate starts nothing.
func watchRate(c *countingReader, minRate int64, window time.Duration, cancel context.CancelCauseFunc) *rateWatch {
	w := &rateWatch{stop: make(chan struct{})}
	if minRate <= 0 || window <= 0 {
		return w
	}
	need := int64(float64(minRate) * window.Seconds())
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(window)
		defer t.Stop()
		last := c.n.Load()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			n := c.n.Load()
			if n-last < need {
				cancel(fmt.Errorf("%d bytes in %s, minimum %d/s: %w", n-last, window, minRate, failure.ErrTooSlow))
				return
			}
			last = n
		}
	}()
	return w
}

// Stop ends the watchdog and waits for it.
func (w *rateWatch) Stop() {
	close(w.stop)
	w.wg.Wait()
}
