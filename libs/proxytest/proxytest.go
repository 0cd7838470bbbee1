// Package proxytest starts real HTTP forward proxies on loopback addresses
// for tests of the fetcher and the proxy pool: absolute-form GET requests
// and CONNECT tunnels, optional basic proxy credentials, and fault modes
// (dead, slow, wrong content).
package proxytest

import (
	"testing"
	"time"
)

// Mode selects how a proxy behaves.
type Mode int

const (
	Healthy      Mode = iota // forwards requests faithfully
	Slow                     // forwards after Options.Delay
	WrongContent             // answers 200 with a body of its own instead of forwarding
)

// Options configures a proxy.
type Options struct {
	Mode     Mode
	Delay    time.Duration // for Slow
	Username string        // when set, requires Proxy-Authorization basic credentials
	Password string
}

// Proxy is a running forward proxy.
type Proxy struct{}

// Start starts a proxy listening on ip (e.g. "127.0.0.5") at a free port;
// it is closed at test cleanup.
func Start(t testing.TB, ip string, o Options) *Proxy { panic("unimplemented") }

// URL returns the proxy URL, with credentials when configured
// (http://user:pass@127.0.0.5:port).
func (p *Proxy) URL() string { panic("unimplemented") }

// Addr returns host:port.
func (p *Proxy) Addr() string { panic("unimplemented") }

// Requests returns how many requests (GET or CONNECT) it has served.
func (p *Proxy) Requests() int { panic("unimplemented") }

// Close stops the proxy (a "dead" proxy: connections are refused after).
func (p *Proxy) Close() { panic("unimplemented") }
