package main

import (
	"context"
	"log"
	"time"
)

// injectFaults runs the schedule until ctx ends: each cycle of every, instance
// A then B in turn is killed with -9 and restarted; a quarter later the
// other's database link is cut for two seconds; half-way the first is
// stopped with SIGTERM and restarted with a slow provider (a latency
// spike), which lasts half a cycle, until its next restart.
func (f *fleet) injectFaults(ctx context.Context, every time.Duration) {
	for cycle := 0; ; cycle++ {
		x, y := f.instances[cycle%2], f.instances[1-cycle%2]
		steps := []struct {
			kind string
			do   func() error
		}{
			{"kill -9 and restart", func() error { x.current.Load().Kill(); return f.start(x, normalLatency) }},
			{"database link cut 2s", func() error {
				y.link.Cut()
				time.Sleep(2 * time.Second)
				y.link.Restore()
				return nil
			}},
			{"SIGTERM and restart", func() error {
				if err := y.current.Load().Stop(30 * time.Second); err != nil {
					f.problem(y.name + ": " + err.Error())
				}
				return f.start(y, normalLatency)
			}},
			{"provider latency spike (restart at " + spikeLatency + ")", func() error {
				if err := x.current.Load().Stop(30 * time.Second); err != nil {
					f.problem(x.name + ": " + err.Error())
				}
				return f.start(x, spikeLatency)
			}},
		}
		for _, step := range steps {
			select {
			case <-ctx.Done():
				return
			case <-time.After(every / time.Duration(len(steps))):
			}
			if err := step.do(); err != nil {
				f.problem(err.Error())
				continue
			}
			f.count(step.kind)
			log.Printf("fault: %s", step.kind)
		}
	}
}

// problem records what went wrong with a fault itself: a SIGTERM that did
// not end the process cleanly, a restart that failed. Each is a violation.
func (f *fleet) problem(what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, what)
}

func (f *fleet) count(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[kind]++
}

// healAll ends every fault: links restored, both instances running with
// the usual provider.
func (f *fleet) healAll() error {
	for _, in := range f.instances {
		in.link.Restore()
		if err := in.current.Load().Stop(30 * time.Second); err != nil {
			f.problem(in.name + " at the end: " + err.Error())
		}
		if err := f.start(in, normalLatency); err != nil {
			return err
		}
	}
	return nil
}

// sampleRSS reads each instance's resident set size every period.
func (f *fleet) sampleRSS(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		for i, in := range f.instances {
			if rss, err := in.current.Load().RSS(); err == nil {
				f.rssPeak[i] = max(f.rssPeak[i], rss)
			}
		}
		f.samples++
		f.mu.Unlock()
	}
}
