// Package control follows the crawl specifications of the control topic
// (libs/crawlcontrol) and tells when everything published before the
// fetcher started has been applied, so that no request is fetched before
// its crawl's state (paused, cancelled) is known.
package control

import (
	"context"
	"fmt"
	"sync"

	"github.com/segmentio/kafka-go"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/kafkaio"
)

// probeGroup is a group id that never joins nor commits: asking for its
// offsets returns the topic's end offsets only.
const probeGroup = "fetcher-control-probe"

// Follow reads the control topic of c from the beginning into specs and
// keeps following it until ctx is done, like crawlcontrol.Follow, and
// calls caughtUp once, when every record present at the start has been
// applied. Undecodable records go to onError (may be nil) and are skipped.
func Follow(ctx context.Context, c kafkaio.Config, specs *crawlcontrol.Specs, caughtUp func(), onError func(error)) error {
	topic := c.Topics().Control
	offsets, err := kafkaio.GroupOffsets(ctx, c, c.GroupFor(probeGroup), topic)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("read end offsets of %s: %w", topic, err)
	}
	pending := make(map[int]int64) // partition -> offset of its last record at the start
	for _, p := range offsets {
		if p.End > p.First {
			pending[p.Partition] = p.End - 1
		}
	}
	var once sync.Once
	if len(pending) == 0 {
		once.Do(caughtUp)
	}
	err = kafkaio.Follow(ctx, c, topic, func(m kafka.Message) {
		apply(specs, m, onError)
		if last, ok := pending[m.Partition]; ok && m.Offset >= last {
			delete(pending, m.Partition)
			if len(pending) == 0 {
				once.Do(caughtUp)
			}
		}
	})
	if err != nil {
		return fmt.Errorf("follow control topic: %w", err)
	}
	return nil
}

// apply records one control-topic record in specs.
func apply(specs *crawlcontrol.Specs, m kafka.Message, onError func(error)) {
	if m.Value == nil {
		specs.Delete(string(m.Key))
		return
	}
	spec := &crawlv1.CrawlSpec{}
	if err := kafkaio.Decode(m, spec); err != nil {
		if onError != nil {
			onError(fmt.Errorf("decode crawl spec at offset %d: %w", m.Offset, err))
		}
		return
	}
	specs.Apply(spec)
}
