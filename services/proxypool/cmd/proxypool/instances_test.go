package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/api"
	"github.com/trawl-crawler/trawl/services/proxypool/internal/proxylist"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
	"github.com/trawl-crawler/trawl/testkit/proxytest"
)

// instance is one running proxypool process (in-process: run with its
// own flags, registry, writer, groups).
type instance struct {
	name, admin, api string
	stop             func()
}

// startInstance runs the service with args until stop or the end of the
// test.
func startInstance(t *testing.T, name string, kcfg kafkaio.Config, args ...string) *instance {
	t.Helper()
	in := &instance{name: name, admin: freeAddr(t, "127.0.0.50"), api: freeAddr(t, "127.0.0.51")}
	args = append([]string{
		"--kafka-brokers", strings.Join(kcfg.Brokers, ","),
		"--kafka-topic-prefix", kcfg.TopicPrefix,
		"--kafka-partitions", fmt.Sprint(kcfg.Partitions),
		"--kafka-session-timeout", kafkatest.SessionTimeout.String(),
		"--kafka-rebalance-timeout", kafkatest.RebalanceTimeout.String(),
		"--admin-addr", in.admin, "--api-addr", in.api, "--log-level", "warn",
	}, args...)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, noEnv) }()
	var once sync.Once
	in.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s: run: %v", name, err)
				}
			case <-time.After(20 * time.Second):
				t.Errorf("%s: run did not stop within 20s", name)
			}
		})
	}
	t.Cleanup(in.stop)
	return in
}

// view is the instance's GET /proxies body (its view of the pool).
func (in *instance) view(t *testing.T) string {
	status, body, err := httpGet(t, in.api, "/proxies")
	if err != nil || status != http.StatusOK {
		return ""
	}
	return body
}

func (in *instance) leading(t *testing.T) bool {
	_, metrics, _ := httpGet(t, in.admin, "/metrics")
	return strings.Contains(metrics, "\ncrawler_proxypool_leader 1\n")
}

func decodeView(t *testing.T, body string) map[string]api.Proxy {
	t.Helper()
	var ps []api.Proxy
	if err := json.Unmarshal([]byte(body), &ps); err != nil {
		t.Fatalf("decode /proxies %q: %v", body, err)
	}
	out := make(map[string]api.Proxy, len(ps))
	for _, p := range ps {
		out[p.Addr] = p
	}
	return out
}

// TestTwoInstancesOneView runs two proxy pools on one broker at once:
// exactly one leads; feedback sent to the feedback topic (applied by the
// leader) shows in both views, which are identical; when the leader stops
// the other leads with every score kept (its first check round builds on
// them), republishes them to the fetchers' topic, and a third instance
// started afterwards (a restart) reloads the same view from the
// proxy-state topic.
func TestTwoInstancesOneView(t *testing.T) {
	kcfg := kafkatest.Config(t, 2)
	page := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "known page")
	}))
	ln, err := new(net.ListenConfig).Listen(t.Context(), "tcp", "127.0.0.58:0")
	if err != nil {
		t.Fatal(err)
	}
	page.Listener.Close()
	page.Listener = ln
	page.Start()
	defer page.Close()
	scored := proxytest.Start(t, "127.0.0.59", proxytest.Options{Username: "u", Password: "pw-123456"})
	other := proxytest.Start(t, "127.0.0.60", proxytest.Options{})
	file := filepath.Join(t.TempDir(), "proxies.txt")
	if err := os.WriteFile(file, []byte(scored.URL()+"\n"+other.Addr()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, _, err := proxylist.ParseLine(scored.URL())
	if err != nil {
		t.Fatal(err)
	}
	scoredID := e.ID()
	// One round per term: the long interval keeps checks from moving
	// the scores while the views are compared.
	args := []string{"--proxies-file", file, "--check-url", page.URL, "--check-expect", "known page",
		"--check-timeout", "2s", "--check-interval", "1h", "--ban-below", "0.05"}
	a := startInstance(t, "a", kcfg, args...)
	b := startInstance(t, "b", kcfg, args...)

	checked := func(in *instance) bool {
		body := in.view(t)
		if body == "" {
			return false
		}
		v := decodeView(t, body)
		return len(v) == 2 && v[scored.Addr()].Checked && v[other.Addr()].Checked
	}
	eventually(t, "both instances see both proxies checked", func() bool { return checked(a) && checked(b) })
	var leader, follower *instance
	eventually(t, "exactly one leader", func() bool {
		la, lb := a.leading(t), b.leading(t)
		switch {
		case la && !lb:
			leader, follower = a, b
		case lb && !la:
			leader, follower = b, a
		default:
			return false
		}
		return true
	})

	// Feedback from the fetchers: five timeouts through the scored proxy.
	w := kafkaio.NewWriter(kcfg, nil, nil)
	defer w.Close()
	const reports = 5
	var msgs []kafka.Message
	for range reports {
		m, err := kafkaio.NewMessage(kcfg.Topics().ProxyFeedback, []byte(scoredID), &crawlv1.ProxyFeedback{
			ProxyId: scoredID, Host: "127.0.0.2", Outcome: "timeout", At: timestamppb.Now()})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if err := w.Write(t.Context(), msgs...); err != nil {
		t.Fatal(err)
	}
	var agreed string
	eventually(t, "both views show the feedback, identically", func() bool {
		va, vb := a.view(t), b.view(t)
		if va == "" || va != vb {
			return false
		}
		agreed = va
		return decodeView(t, va)[scored.Addr()].Feedback == reports
	})
	before := decodeView(t, agreed)[scored.Addr()]
	if before.Success >= 0.6 || before.Banned {
		t.Fatalf("after %d timeouts: success %v banned %v, want below 0.6 and not banned", reports, before.Success, before.Banned)
	}

	// The leader stops: the other instance leads, with the scores kept.
	leader.stop()
	eventually(t, "the other instance leads", func() bool { return follower.leading(t) })
	var after api.Proxy
	eventually(t, "the new leader's first round", func() bool {
		body := follower.view(t)
		if body == "" {
			return false
		}
		after = decodeView(t, body)[scored.Addr()]
		return after.CheckedAt != nil && after.CheckedAt.After(*before.CheckedAt)
	})
	if after.Feedback != reports {
		t.Errorf("new leader: feedback %d, want %d (kept from the state topic)", after.Feedback, reports)
	}
	// A successful check moves success halfway to 1: from the kept rate it
	// stays below 1; from scratch it would be exactly 1.
	if want := 0.5 + 0.5*before.Success; after.Success > want+0.01 || after.Success < want-0.01 {
		t.Errorf("new leader: success %v after a check, want %v (half way from the kept %v)", after.Success, want, before.Success)
	}

	// The fetchers' topic carries the new leader's score.
	var mu sync.Mutex
	published := map[string]kafka.Message{}
	fctx, fcancel := context.WithCancel(t.Context())
	fdone := make(chan error, 1)
	go func() {
		fdone <- kafkaio.Follow(fctx, kcfg, kcfg.Topics().Proxies, func(m kafka.Message) {
			mu.Lock()
			published[string(m.Key)] = m
			mu.Unlock()
		})
	}()
	defer func() {
		fcancel()
		if err := <-fdone; err != nil {
			t.Errorf("follow proxies: %v", err)
		}
	}()
	eventually(t, "the proxies topic carries the new leader's score", func() bool {
		mu.Lock()
		m, ok := published[scoredID]
		mu.Unlock()
		var p crawlv1.Proxy
		if !ok || m.Value == nil || kafkaio.Decode(m, &p) != nil {
			return false
		}
		return p.GetScore() == after.Score
	})

	// A restarted instance reloads the same view.
	c := startInstance(t, "c", kcfg, args...)
	eventually(t, "the restarted instance shares the leader's view", func() bool {
		vc := c.view(t)
		return vc != "" && vc == follower.view(t)
	})
	if c.leading(t) {
		t.Error("the restarted instance leads while the other still does")
	}
}
