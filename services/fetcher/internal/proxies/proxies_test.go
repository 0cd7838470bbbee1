package proxies

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/failure"
	"github.com/trawl-crawler/trawl/services/fetcher/internal/httpfetch"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

func TestPickSticky(t *testing.T) {
	p := NewPool()
	for i := range 5 {
		if err := p.Put(fmt.Sprintf("p%d", i), fmt.Sprintf("http://u:secret@10.0.0.%d:3128", i+1)); err != nil {
			t.Fatal(err)
		}
	}
	const hosts = 2000
	before := make(map[string]string, hosts)
	count := map[string]int{}
	for i := range hosts {
		h := fmt.Sprintf("host%d.example", i)
		id, u, ok := p.Pick(h)
		if !ok || u == nil {
			t.Fatalf("Pick(%s) found nothing", h)
		}
		if again, _, _ := p.Pick(h); again != id {
			t.Fatalf("Pick(%s) not deterministic: %s then %s", h, id, again)
		}
		before[h] = id
		count[id]++
	}
	for id, n := range count {
		// 400 expected per proxy; allow wide slack, but catch a broken hash
		if n < hosts/5/2 || n > hosts/5*2 {
			t.Errorf("proxy %s got %d of %d hosts, want about %d", id, n, hosts, hosts/5)
		}
	}
	p.Remove("p2")
	for h, old := range before {
		id, _, _ := p.Pick(h)
		if old != "p2" && id != old {
			t.Fatalf("host %s moved from %s to %s although %s is alive", h, old, id, old)
		}
		if id == "p2" {
			t.Fatalf("removed proxy picked")
		}
	}
	if !p.IsProxyAddr("10.0.0.1:3128") || p.IsProxyAddr("10.0.0.3:3128") {
		t.Fatalf("IsProxyAddr does not follow the live set")
	}
}

func TestApply(t *testing.T) {
	value := func(id, u string) kafka.Message {
		m, err := kafkaio.NewMessage("proxies", []byte(id), &crawlv1.Proxy{Id: id, Url: u})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name    string
		msgs    []kafka.Message
		wantLen int
		wantErr bool
	}{
		{name: "put", msgs: []kafka.Message{value("a", "http://1.2.3.4:8080")}, wantLen: 1},
		{name: "replace", msgs: []kafka.Message{value("a", "http://1.2.3.4:8080"), value("a", "http://1.2.3.5:8080")}, wantLen: 1},
		{name: "tombstone", msgs: []kafka.Message{value("a", "http://1.2.3.4:8080"), {Key: []byte("a")}}, wantLen: 0},
		{name: "garbage", msgs: []kafka.Message{{Key: []byte("a"), Value: []byte{0xff, 0xff, 0xff}}}, wantErr: true},
		{name: "bad scheme", msgs: []kafka.Message{value("a", "ftp://1.2.3.4")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPool()
			var err error
			for _, m := range tt.msgs {
				if e := p.Apply(m); e != nil {
					err = e
				}
			}
			if (err != nil) != tt.wantErr || p.Len() != tt.wantLen {
				t.Fatalf("err, len = %v %d, want err %v len %d", err, p.Len(), tt.wantErr, tt.wantLen)
			}
		})
	}
}

func TestFetchThroughProxy(t *testing.T) {
	ln, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<p>origin</p>"))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	tests := []struct {
		name         string
		allowPrivate bool
		wantKind     failure.Kind
		wantProxied  bool
	}{
		{name: "through the proxy", allowPrivate: true, wantProxied: true},
		{name: "private target refused before the proxy", allowPrivate: false, wantKind: failure.RefusedAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			px := proxytest.Start(t, "127.0.0.9", proxytest.Options{Username: "user", Password: "s3cret"})
			pool := NewPool()
			if err := pool.Put("px1", px.URL()); err != nil {
				t.Fatal(err)
			}
			f := httpfetch.New(httpfetch.Options{AllowPrivate: tt.allowPrivate, Proxies: pool})
			defer f.Close()
			r := f.Fetch(t.Context(), httpfetch.Request{URL: srv.URL + "/", Host: "127.0.0.2"})
			if r.Kind != tt.wantKind {
				t.Fatalf("kind = %q (err %v), want %q", r.Kind, r.Err, tt.wantKind)
			}
			if got := px.Requests() > 0; got != tt.wantProxied {
				t.Fatalf("proxy served %d requests, want proxied %v", px.Requests(), tt.wantProxied)
			}
			if tt.wantProxied && (r.Status != 200 || string(r.Body) != "<p>origin</p>" || r.ProxyID != "px1") {
				t.Fatalf("status, body, proxy = %d %q %q", r.Status, r.Body, r.ProxyID)
			}
		})
	}
}
