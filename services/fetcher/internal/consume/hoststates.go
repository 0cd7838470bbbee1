package consume

import (
	"context"
	"time"

	"github.com/segmentio/kafka-go"
	"go.uber.org/zap"

	"github.com/trawl-crawler/trawl/services/fetcher/internal/hoststate"
)

// Host states handed to the next owner of a partition (Options.HostStates).

// publishStates hands every known host's state to the next owner.
func (h *handler) publishStates() {
	if h.s.opts.HostStates == nil {
		return
	}
	now := h.s.opts.Now()
	var msgs []kafka.Message
	for host, st := range h.p.Engine().ChangedStates() {
		m, err := hoststate.Message(h.s.opts.Topics.HostState, host, h.s.opts.InstanceID, st, now)
		if err == nil {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.s.prod.Write(ctx, msgs...); err != nil {
		h.log.Warn("lost host states at close, the next owner waits one delay", zap.Error(err))
	}
}
