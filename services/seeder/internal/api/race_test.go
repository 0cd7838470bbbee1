package api_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/testkit/chtest"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestTwoServersOneOwner runs two API servers of one deployment (one
// broker, one ClickHouse, separate processes' worth of state) and, round
// after round, submits the same new crawl id to both at once: every time
// exactly one answers 201 and the other 409 with the usual error body,
// only the owner's seed is published, and both servers end up knowing the
// same crawls with the owner's specification.
func TestTwoServersOneOwner(t *testing.T) {
	const rounds = 25
	kc := kafkatest.Config(t, 2)
	store := chtest.NewStore(t)
	servers := []env{newEnvOn(t, kc, store, nil), newEnvOn(t, kc, store, nil)}

	type answer struct {
		code int
		body string
	}
	owners := make(map[string]int) // crawl id -> index of the server that created it
	for round := range rounds {
		id := fmt.Sprintf("race-%02d", round)
		answers := make([]answer, len(servers))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, e := range servers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// The name says which server's request won.
				body := fmt.Sprintf(`{"crawl_id":%q,"name":"server-%d","seeds":["http://127.0.0.%d/%s"]}`, id, i, i+2, id)
				code, raw := e.do(t, http.MethodPost, "/v1/crawls", body, nil)
				answers[i] = answer{code, string(raw)}
			}()
		}
		close(start)
		wg.Wait()
		created, conflicts := 0, 0
		for i, a := range answers {
			switch a.code {
			case http.StatusCreated:
				created++
				owners[id] = i
			case http.StatusConflict:
				conflicts++
				if want := `{"error":"crawl \"` + id + `\" exists","fields":[{"field":"crawl_id","message":"already used"}]}` + "\n"; a.body != want {
					t.Errorf("round %d: 409 body %q, want %q", round, a.body, want)
				}
			default:
				t.Errorf("round %d: server %d answered %d %s", round, i, a.code, a.body)
			}
		}
		if created != 1 || conflicts != 1 {
			t.Fatalf("round %d: %d created and %d conflicts (%v), want one of each", round, created, conflicts, answers)
		}
	}

	// Both servers know every crawl, each with its owner's specification
	// (a server learns the other's crawls through the control topic).
	for i, e := range servers {
		for id, owner := range owners {
			var v struct {
				Name string `json:"name"`
			}
			deadline := time.After(10 * time.Second)
			for code := 0; code != http.StatusOK; {
				code, _ = e.do(t, http.MethodGet, "/v1/crawls/"+id, "", nil)
				if code == http.StatusOK {
					e.do(t, http.MethodGet, "/v1/crawls/"+id, "", &v)
					break
				}
				select { // the server's follower has not read the spec yet
				case <-time.After(20 * time.Millisecond):
				case <-deadline:
					t.Fatalf("server %d never learned crawl %s", i, id)
				}
			}
			if want := fmt.Sprintf("server-%d", owner); v.Name != want {
				t.Errorf("server %d shows %s with name %q, want %q (its owner's)", i, id, v.Name, want)
			}
		}
	}

	// Only owners published seeds: one per crawl.
	seeds := make(map[string]int)
	err := kafkaio.ReadToEnd(t.Context(), kc, kc.Topics().Discovered, kafkaio.ReadOptions{}, func(m kafka.Message) {
		var d crawlv1.DiscoveredURL
		if err := kafkaio.Decode(m, &d); err == nil {
			seeds[d.GetCrawlId()]++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seeds) != rounds {
		t.Errorf("seeds of %d crawls published, want %d", len(seeds), rounds)
	}
	for id, n := range seeds {
		if n != 1 {
			t.Errorf("crawl %s: %d seeds published, want 1 (the owner's)", id, n)
		}
	}
	// Every claim is on the control topic: two per crawl id.
	claims := 0
	err = kafkaio.ReadToEnd(t.Context(), kc, kc.Topics().Control, kafkaio.ReadOptions{}, func(m kafka.Message) {
		if crawlcontrol.IsClaim(m) {
			claims++
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if claims != 2*rounds {
		t.Errorf("%d claims on the control topic, want %d", claims, 2*rounds)
	}
}
