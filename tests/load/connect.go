package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// connect opens, before the rounds, one connection per worker from the
// client to each instance s, and has s authenticate once each user whose
// keys it will replay (GET /api/v1/me, no key). The at-home replay runs on
// the connections the warm-up opened, for users whose tokens that instance
// has already looked up and cached. A slice of the replays on another
// instance lasts tens of milliseconds (each key is replayed there once), so
// eight connects and sixteen token reads in its first slice were most of
// it (a 40-55 ms stall at p99 in round 0, p50 faster than at home): costs of
// a new client and a new user, which the at-home replay never paid. No key
// is sent: every key those instances replay is still one they never ran.
func (b *bench) connect(ctx context.Context, instances ...*shop) error {
	for _, s := range instances {
		errs := make([]error, b.cfg.Workers)
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for w := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-gate
				for _, name := range []string{phaseWarmup, phaseFresh} { // whose keys are replayed
					errs[w] = errors.Join(errs[w], b.me(ctx, s, b.users[name][w].token))
				}
			}()
		}
		close(gate)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) me(ctx context.Context, s *shop, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/me", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("me on %s: %d", s.url, resp.StatusCode)
	}
	return nil
}
