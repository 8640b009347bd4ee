package main

import (
	"context"
	"errors"
	"time"
)

// measureBeside drives the shop's binary (-shop, as measureProcess does)
// and the peer (-peer, as measurePeer does) in one run, in slices that take
// turns: in each round a slice of fresh orders on each, then a slice of
// replays on each, who goes first alternating round by round. Run one after
// the other, the two meet a shared machine at different moments, and its
// speed drifts over tens of seconds; slices in turn meet the same drift.
// Each slice begins after a pause of -slice-pause (1.5 s), so that what a side does
// in the background after its slice (the shop writes its replay counts
// every second, and its outbox relay hands on the orders' events) falls on
// neither's clock. -rounds is even, so that each goes first as often. The
// reports are the shop's and the peer's.
func measureBeside(ctx context.Context, cfg config) (shopRep, peerRep *report, err error) {
	s, closeDB, err := processBench(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	defer closeDB()
	defer s.client.CloseIdleConnections()
	p := peerBench(cfg)
	defer p.client.CloseIdleConnections()
	shopRep, peerRep = s.newReport(), p.newReport()
	if err := errors.Join(s.warmUp(ctx, shopRep), p.warmUp(ctx, peerRep)); err != nil {
		return nil, nil, err
	}
	sides := []side{{s, shopRep}, {p, peerRep}}
	slice, sliceOps := cfg.Phase/time.Duration(shopRep.rounds), cfg.Ops/shopRep.rounds
	for r := range shopRep.rounds {
		for _, name := range []string{phaseFresh, phaseHit} {
			for _, at := range inTurnBeside(sides, r) {
				time.Sleep(cfg.SlicePause)
				work := at.b.replayHit
				if name == phaseFresh {
					work = at.b.fresh(phaseFresh)
				}
				at.rep.phases[name] = at.rep.phases[name].merge(at.b.phase(ctx, name, work, slice, sliceOps))
			}
		}
	}
	peerAudit(peerRep)
	return shopRep, peerRep, s.processAudit(ctx, shopRep)
}

// side is one of the two measureBeside drives: its bench and its report.
type side struct {
	b   *bench
	rep *report
}

// inTurnBeside is round r's order: the shop first in even rounds, the peer in odd ones.
func inTurnBeside(sides []side, r int) []side {
	if r%2 == 0 {
		return sides
	}
	return []side{sides[1], sides[0]}
}
