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
// client to each instance s, so that a replay phase on an instance the
// client has not talked to yet does not pay for opening its connections
// in its first slice: the at-home replay runs on the connections the
// warm-up opened. A slice of the replays on another instance lasts tens of
// milliseconds (each key is replayed there once), so eight connects in it
// are a share of its time that the at-home replay never pays. It sends
// /healthz, no key: every key those instances replay is still one they
// never ran.
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
				errs[w] = b.healthz(ctx, s)
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

func (b *bench) healthz(ctx context.Context, s *shop) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthz %s: %d", s.url, resp.StatusCode)
	}
	return nil
}
