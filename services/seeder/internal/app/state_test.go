package app

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap/zaptest"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
	"github.com/trawl-crawler/trawl/services/seeder/internal/config"
	"github.com/trawl-crawler/trawl/services/seeder/internal/jobs"
	"github.com/trawl-crawler/trawl/testkit/kafkatest"
)

// TestSetState: `seeder state` publishes the next revision of a crawl's
// spec with the new state, leaves a crawl already in it alone, refuses to
// bring a cancelled crawl back and names a crawl id nobody published.
func TestSetState(t *testing.T) {
	kc := kafkatest.Config(t, 2)
	log := zaptest.NewLogger(t)
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	job, err := jobs.BuildSpec(jobs.Request{CrawlID: "s1"}, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	w := kafkaio.NewWriter(kc, log, nil)
	defer w.Close()
	if _, err := publishSpec(t.Context(), kc, w, log, job.Spec, t0); err != nil {
		t.Fatal(err)
	}
	set := func(state string) (*crawlv1.CrawlSpec, error) {
		return SetState(t.Context(), config.State{Kafka: kc, CrawlID: "s1", State: state}, log, t0.Add(time.Minute))
	}
	spec, err := set("paused")
	if err != nil || spec.GetState() != crawlv1.CrawlState_CRAWL_STATE_PAUSED || spec.GetRevision() != 2 {
		t.Fatalf("pause: %v, %v", spec, err)
	}
	if spec, err := set("paused"); err != nil || spec.GetRevision() != 2 {
		t.Errorf("pause again: revision %d, %v; want revision 2 left alone", spec.GetRevision(), err)
	}
	if spec, err := set("cancelled"); err != nil || spec.GetState() != crawlv1.CrawlState_CRAWL_STATE_CANCELLED || spec.GetRevision() != 3 {
		t.Fatalf("cancel: %v, %v", spec, err)
	}
	if _, err := set("running"); !errors.Is(err, jobs.ErrFinal) {
		t.Errorf("resume a cancelled crawl: %v, want jobs.ErrFinal", err)
	}
	specs := crawlcontrol.NewSpecs()
	if err := kafkaio.ReadToEnd(t.Context(), kc, kc.Topics().Control, kafkaio.ReadOptions{}, func(m kafka.Message) {
		var sp crawlv1.CrawlSpec
		if kafkaio.Decode(m, &sp) == nil && sp.GetCrawlId() != "" {
			specs.Apply(&sp)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if got := specs.Get("s1"); got.GetState() != crawlv1.CrawlState_CRAWL_STATE_CANCELLED || got.GetRevision() != 3 {
		t.Errorf("control topic holds %v, want revision 3, cancelled", got)
	}
	_, err = SetState(t.Context(), config.State{Kafka: kc, CrawlID: "nope", State: "cancelled"}, log, t0)
	if !errors.Is(err, ErrNoCrawl) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown crawl: %v, want ErrNoCrawl naming it", err)
	}
	if err := (config.State{Kafka: kc, CrawlID: "s1", State: "gone"}).Validate(); err == nil || !strings.Contains(err.Error(), "running, paused or cancelled") {
		t.Errorf("bad state: %v", err)
	}
}
