package control

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/trawl-crawler/trawl/libs/crawlcontrol"
	"github.com/trawl-crawler/trawl/libs/crawlmsg/crawlv1"
	"github.com/trawl-crawler/trawl/libs/telemetry"
)

// Crawl-id ownership across API servers. A submission writes a claim
// (crawlv1.CrawlClaim, unique claimant) to the control topic, then waits
// until this server's follower reads it back. The follower reads the
// claim's partition in order, so by then it has read every earlier claim
// and specification of the id: the claim owns the id when no
// specification of the id and no other claim of it came before.
// Every server decides the same way from the same log, so of two servers
// racing for one id exactly one owns it, with no shared memory.

// ClaimTimeout bounds how long Claim waits for its claim to come back
// through the follower.
const ClaimTimeout = 30 * time.Second

// ErrClaimTimeout is returned when a claim did not come back within
// ClaimTimeout (the follower is stuck or far behind).
var ErrClaimTimeout = errors.New("claim not read back in time")

// maxFirstClaims bounds the remembered first claims; past it the ids that
// got a specification (which then decides alone) are forgotten.
const maxFirstClaims = 10000

// claims is the follower's view of claims. Guarded by Control.claimMu.
type claims struct {
	first   map[string]string    // crawl id -> claimant of its first claim, ids without a spec
	waiting map[string]chan bool // claimant -> where its verdict goes
}

// Claim claims crawlID for one submission: it publishes a claim record
// and reports whether this submission owns the id (true: go on and publish
// the crawl's first specification; false: the id is taken, by a
// specification or an earlier claim of another submission, possibly on
// another server). Run must be running and caught up. It blocks until the
// claim is read back, ctx is done, or ClaimTimeout.
//
// A claim whose owner dies before publishing the specification keeps the
// id taken.
func (c *Control) Claim(ctx context.Context, crawlID string) (bool, error) {
	claimant := newClaimant()
	msg, err := crawlcontrol.ClaimMessage(c.cfg.Topics().Control, &crawlv1.CrawlClaim{
		CrawlId: crawlID, Claimant: claimant, ClaimedAt: timestamppb.New(c.now()),
	})
	if err != nil {
		return false, fmt.Errorf("encode crawl claim: %w", err)
	}
	verdict := make(chan bool, 1)
	c.claimMu.Lock()
	c.claims.waiting[claimant] = verdict
	c.claimMu.Unlock()
	defer func() {
		c.claimMu.Lock()
		delete(c.claims.waiting, claimant)
		c.claimMu.Unlock()
	}()
	if err := c.w.Write(ctx, msg); err != nil {
		return false, fmt.Errorf("publish crawl claim: %w", err)
	}
	timer := time.NewTimer(ClaimTimeout)
	defer timer.Stop()
	select {
	case won := <-verdict:
		return won, nil
	case <-ctx.Done():
		return false, fmt.Errorf("wait for crawl claim: %w", ctx.Err())
	case <-timer.C:
		return false, fmt.Errorf("wait for crawl claim: %w", ErrClaimTimeout)
	}
}

// observeClaim is the follower's decision on one claim, called in topic
// order (crawlcontrol.FollowClaims): the claim owns its id when no
// specification and no other claim of the id came before it.
func (c *Control) observeClaim(cl *crawlv1.CrawlClaim, m kafka.Message) {
	id, by := cl.GetCrawlId(), cl.GetClaimant()
	specced := c.specs.Get(id) != nil
	c.claimMu.Lock()
	defer c.claimMu.Unlock()
	won := false
	if !specced {
		first, ok := c.claims.first[id]
		if !ok {
			c.claims.first[id] = by
			first = by
		}
		won = first == by
	}
	if ch, ok := c.claims.waiting[by]; ok {
		ch <- won // buffered; one claim record per claimant
		delete(c.claims.waiting, by)
	}
	if !won {
		c.log.Debug("crawl claim lost", telemetry.Crawl(id), telemetry.Offset(m.Offset))
	}
	if len(c.claims.first) > maxFirstClaims {
		for cid := range c.claims.first {
			if c.specs.Get(cid) != nil {
				delete(c.claims.first, cid)
			}
		}
	}
}

func newClaimant() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
