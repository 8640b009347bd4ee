package main

import (
	"context"
	"strings"
)

// peerOrder is the hot catalog's order in the peer's shape: 2 units of its
// first product and 1 of its second (../shared/peer-fiber seeds two).
const peerOrder = `{"items":[{"product_id":1,"quantity":2},{"product_id":2,"quantity":1}]}`

// measurePeer drives the peer at cfg.Peer (Fiber's idempotency middleware,
// no authentication) as measure drives the shop with -fresh-only -replays:
// the same client, workers, warm-up and rounds, fresh orders with a new key
// each, then the keys replayed over and over. The peer marks no replay, so
// each replay's body is checked to be the original's (a new order would
// have another id). Its database is the peer's own: what is audited is that
// no operation failed.
func measurePeer(ctx context.Context, cfg config) (*report, error) {
	b := peerBench(cfg)
	defer b.client.CloseIdleConnections()
	rep := b.newReport()
	if err := b.warmUp(ctx, rep); err != nil {
		return nil, err
	}
	if err := b.rounds(ctx, rep, []step{{phaseFresh, b.fresh(phaseFresh)}, {phaseHit, b.replayHit}}); err != nil {
		return nil, err
	}
	peerAudit(rep)
	return rep, nil
}

// peerBench is the bench of the peer at cfg.Peer: no database, no tokens.
func peerBench(cfg config) *bench {
	b := newBench(cfg, nil)
	b.once, b.orderBody = &shop{url: strings.TrimSuffix(cfg.Peer, "/")}, peerOrder
	b.placing = []*shop{b.once}
	b.users[phaseWarmup], b.users[phaseFresh] = make([]user, cfg.Workers), make([]user, cfg.Workers) // no token: the peer authenticates no one
	return b
}

// peerAudit is the peer's audit: that no operation failed.
func peerAudit(rep *report) {
	var failed int64
	for _, p := range rep.phases {
		failed += int64(p.failed)
	}
	rep.audit = audit{{"failed operations", failed, 0}}
}
