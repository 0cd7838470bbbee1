package proxytest

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"
)

// StartSOCKS5 starts a SOCKS5 proxy (RFC 1928, CONNECT only) listening on
// ip at a free port, closed at test cleanup. With o.Username it requires
// username/password authentication (RFC 1929). Slow delays the CONNECT
// reply; WrongContent accepts the CONNECT but answers with WrongBody instead
// of reaching the target. URL returns socks5://[user:pass@]host:port.
func StartSOCKS5(t testing.TB, ip string, o Options) *Proxy {
	t.Helper()
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatalf("proxytest: listen on %s: %v", ip, err)
	}
	p := &Proxy{
		scheme:  "socks5",
		opts:    o,
		ln:      ln,
		done:    make(chan struct{}),
		tunnels: make(map[net.Conn]struct{}),
	}
	p.handlers.Add(1)
	go func() {
		defer p.handlers.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Close
			}
			if !p.enter() {
				_ = c.Close()
				return
			}
			go func() {
				defer p.handlers.Done()
				p.serveSOCKS(c)
			}()
		}
	}()
	t.Cleanup(p.Close)
	return p
}

// socksHandshakeTimeout bounds the greeting and request of one client.
const socksHandshakeTimeout = 10 * time.Second

var errSOCKS = errors.New("socks5 protocol error")

func (p *Proxy) serveSOCKS(c net.Conn) {
	if !p.track(c) {
		return
	}
	var upstream net.Conn
	defer func() { p.untrack(c, upstream) }()
	_ = c.SetDeadline(time.Now().Add(socksHandshakeTimeout))
	br := bufio.NewReader(c)
	p.requests.Add(1)
	if err := p.socksAuth(br, c); err != nil {
		return
	}
	target, err := readSOCKSRequest(br)
	if err != nil {
		_, _ = c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0}) // command not supported / malformed
		return
	}
	if p.opts.Mode == Slow {
		_ = c.SetDeadline(time.Time{})
		if !p.sleep(context.Background(), p.opts.Delay) { // Close wakes it
			return
		}
	}
	if p.opts.Mode != WrongContent {
		upstream, err = net.DialTimeout("tcp", target, dialTimeout) //nolint:noctx // no context reaches a connection's goroutine: Close ends it
		if err != nil {
			_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0}) // connection refused
			return
		}
		if !p.track(upstream) {
			return
		}
	}
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0}); err != nil {
		return
	}
	if upstream == nil {
		answerWrong(c, br)
		return
	}
	splice(c, br, upstream)
}

// socksAuth negotiates the method and, when credentials are configured,
// checks them.
func (p *Proxy) socksAuth(br *bufio.Reader, c net.Conn) error {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != 5 {
		return errSOCKS
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return errSOCKS
	}
	want := byte(0) // no authentication
	if p.opts.Username != "" {
		want = 2 // username/password
	}
	offered := false
	for _, m := range methods {
		offered = offered || m == want
	}
	if !offered {
		_, _ = c.Write([]byte{5, 0xff})
		return errSOCKS
	}
	if _, err := c.Write([]byte{5, want}); err != nil || want == 0 {
		return err
	}
	// RFC 1929: ver(1) ulen uname plen passwd.
	var ver [1]byte
	if _, err := io.ReadFull(br, ver[:]); err != nil || ver[0] != 1 {
		return errSOCKS
	}
	user, err := readLenPrefixed(br)
	if err != nil {
		return err
	}
	pass, err := readLenPrefixed(br)
	if err != nil {
		return err
	}
	ok := subtle.ConstantTimeCompare(user, []byte(p.opts.Username)) == 1 &&
		subtle.ConstantTimeCompare(pass, []byte(p.opts.Password)) == 1
	if !ok {
		_, _ = c.Write([]byte{1, 1})
		return errSOCKS
	}
	_, err = c.Write([]byte{1, 0})
	return err
}

func readLenPrefixed(br *bufio.Reader) ([]byte, error) {
	n, err := br.ReadByte()
	if err != nil {
		return nil, errSOCKS
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, errSOCKS
	}
	return b, nil
}

// readSOCKSRequest reads a CONNECT request and returns its target host:port.
func readSOCKSRequest(br *bufio.Reader) (string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != 5 || hdr[1] != 1 {
		return "", errSOCKS
	}
	var host string
	switch hdr[3] {
	case 1, 4: // IPv4, IPv6
		ip := make([]byte, 4)
		if hdr[3] == 4 {
			ip = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, ip); err != nil {
			return "", errSOCKS
		}
		host = net.IP(ip).String()
	case 3: // domain name
		name, err := readLenPrefixed(br)
		if err != nil {
			return "", err
		}
		host = string(name)
	default:
		return "", errSOCKS
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return "", errSOCKS
	}
	return net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))), nil
}
