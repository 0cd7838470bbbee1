package consume

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Host states handed to the next owner of a partition (Options.HostStates).

// publishStates hands every known host's state to the next owner.
func (h *handler) publishStates() {
	if h.s.opts.HostStates == nil {
		return
	}
	msgs := h.s.enc.HostStates(h.p.Engine().ChangedStates())
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.s.prod.Write(ctx, msgs...); err != nil {
		h.log.Warn("lost host states at close, the next owner waits one delay", zap.Error(err))
	}
}
