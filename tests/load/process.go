package main

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/shop/shop/database"
)

// measureProcess drives the shop's own binary, a process of its own at
// cfg.Shop over the database cfg.DatabaseURL names, as measurePeer drives
// the peer: the same client, workers, warm-up and rounds of fresh orders
// and their replays. The harness only prepares the database the shop
// already migrated (its users and their tokens, the hot catalog's stock and
// slots) and audits it afterwards, as measure does: the shop shares no Go
// runtime with the client, as the peer does not.
func measureProcess(ctx context.Context, cfg config) (*report, error) {
	b, closeDB, err := processBench(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	defer b.client.CloseIdleConnections()
	rep := b.newReport()
	if err := b.warmUp(ctx, rep); err != nil {
		return nil, err
	}
	if err := b.rounds(ctx, rep, b.steps()); err != nil {
		return nil, err
	}
	return rep, b.processAudit(ctx, rep)
}

// processBench is the bench of the shop's binary at cfg.Shop: its database
// prepared (users and their tokens, the hot catalog's stock and slots);
// closeDB closes the harness's pool.
func processBench(ctx context.Context, cfg config) (b *bench, closeDB func(), err error) {
	if err := cfg.check(); err != nil {
		return nil, nil, err
	}
	if cfg.Shop == "" {
		return nil, nil, errors.New("-shop: the base URL of the running shop")
	}
	db, err := cfg.open()
	if err != nil {
		return nil, nil, err
	}
	b = newBench(cfg, db)
	if err := b.prepare(ctx, phaseWarmup, phaseFresh); err != nil {
		database.Close(db)
		return nil, nil, err
	}
	b.once = &shop{url: strings.TrimSuffix(cfg.Shop, "/")}
	b.placing = []*shop{b.once}
	return b, func() { database.Close(db) }, nil
}

// processAudit audits the shop's database after its rounds.
func (b *bench) processAudit(ctx context.Context, rep *report) (err error) {
	rep.commits, rep.committed = 0, 0 // the harness's pool's: the shop commits in its own process
	rep.audit, err = b.settledAudit(ctx, rep)
	return err
}

// settledAudit is the audit once the running shop has written its replay
// counts (it flushes them every second, and stops with the harness done):
// tried again every half second, for at most 5 s, while it finds a problem.
func (b *bench) settledAudit(ctx context.Context, rep *report) (audit, error) {
	for try := 0; ; try++ {
		a, err := b.audit(ctx, rep)
		if err != nil || len(a.problems()) == 0 || try == 10 {
			return a, err
		}
		select {
		case <-ctx.Done():
			return a, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
