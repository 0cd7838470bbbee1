// Package hanguptest serves a site that hangs up on the second request of
// every connection: a real HTTP/1.1 server on a TCP listener that answers
// the first request of a connection (keep-alive) and reads the second in
// full, then closes the connection without an answer. net/http's
// transport replays such a request on a new connection unless the caller
// stops it; the fetcher's tests check that it does.
package hanguptest

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Arrival is one request the site received: its path and when it came.
type Arrival struct {
	Path string
	At   time.Time
}

// Site is a running hang-up site.
type Site struct {
	// URL is the site's base URL, http://IP:PORT.
	URL string

	mu  sync.Mutex
	got []Arrival
}

// Start serves a hang-up site on ip (a 127.0.0.0/8 address) until the test
// ends. robots.txt is a 404; every other path is a small HTML page.
func Start(t testing.TB, ip string) *Site {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", ip+":0")
	if err != nil {
		t.Fatalf("hanguptest: listen: %v", err)
	}
	s := &Site{URL: "http://" + ln.Addr().String()}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { s.serve(c) })
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return s
}

func (s *Site) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.got = append(s.got, Arrival{Path: req.URL.Path, At: time.Now()})
		s.mu.Unlock()
		if n == 2 {
			return // received in full, never answered
		}
		if req.URL.Path == "/robots.txt" {
			fmt.Fprint(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
			continue
		}
		body := "<html><body><p>page " + req.URL.Path + "</p></body></html>"
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
}

// Received returns the requests received so far, in order.
func (s *Site) Received() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.got...)
}

// Paths returns the paths of the requests received so far, in order.
func (s *Site) Paths() []string {
	var out []string
	for _, a := range s.Received() {
		out = append(out, a.Path)
	}
	return out
}
