package httpfetch

import (
	"container/list"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/net/publicsuffix"
)

// Defaults of the cookie jar bounds.
const (
	DefaultMaxCookieHosts    = 4096
	DefaultMaxCookiesPerHost = 50
)

// boundedJar keeps cookies per host (each host its own jar scoped by the
// public suffix list, so one host's cookies never reach another): at most
// maxHosts hosts, the least recently used forgotten first, and at most
// perHost distinct cookies (name, domain, path) per host; a new cookie
// beyond that is ignored, updates and deletions of known ones still apply.
// Safe for concurrent use.
type boundedJar struct {
	maxHosts, perHost int

	mu    sync.Mutex
	hosts map[string]*list.Element // of *hostJar
	lru   *list.List               // front: most recently used
}

type hostJar struct {
	host  string
	jar   *cookiejar.Jar
	names map[string]bool // cookie keys set so far (bounded by perHost)
}

func newBoundedJar(maxHosts, perHost int) *boundedJar {
	return &boundedJar{maxHosts: maxHosts, perHost: perHost, hosts: make(map[string]*list.Element), lru: list.New()}
}

// get returns host's jar, creating it (and evicting the least recently
// used host when full) if create. Called with mu held.
func (b *boundedJar) get(host string, create bool) *hostJar {
	if el, ok := b.hosts[host]; ok {
		b.lru.MoveToFront(el)
		return el.Value.(*hostJar)
	}
	if !create {
		return nil
	}
	for b.lru.Len() >= b.maxHosts {
		old := b.lru.Back()
		b.lru.Remove(old)
		delete(b.hosts, old.Value.(*hostJar).host)
	}
	// cookiejar.New never fails (its error is reserved).
	jar, _ := cookiejar.New(&cookiejar.Options{PublicSuffixList: publicsuffix.List})
	hj := &hostJar{host: host, jar: jar, names: make(map[string]bool)}
	b.hosts[host] = b.lru.PushFront(hj)
	return hj
}

// SetCookies implements http.CookieJar.
func (b *boundedJar) SetCookies(u *url.URL, cookies []*http.Cookie) {
	b.mu.Lock()
	defer b.mu.Unlock()
	hj := b.get(strings.ToLower(u.Hostname()), true)
	kept := cookies[:0:0]
	for _, c := range cookies {
		key := c.Name + "\x00" + strings.ToLower(c.Domain) + "\x00" + c.Path
		switch {
		case c.MaxAge < 0:
			delete(hj.names, key)
		case !hj.names[key] && len(hj.names) >= b.perHost:
			continue // over the host's bound: ignored
		default:
			hj.names[key] = true
		}
		kept = append(kept, c)
	}
	hj.jar.SetCookies(u, kept)
}

// Cookies implements http.CookieJar.
func (b *boundedJar) Cookies(u *url.URL) []*http.Cookie {
	b.mu.Lock()
	defer b.mu.Unlock()
	hj := b.get(strings.ToLower(u.Hostname()), false)
	if hj == nil {
		return nil
	}
	return hj.jar.Cookies(u)
}

// hostCount returns the number of hosts with a jar (tests).
func (b *boundedJar) hostCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lru.Len()
}
