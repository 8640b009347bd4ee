package main

import (
	"fmt"
	"net/url"
	"regexp"
	"time"
)

// messageConfig is how the outbox's relay polls (outbox.RelayConfig), and
// where its JetStream consumer publishes: nowhere when NATSURL is empty.
type messageConfig struct {
	OutboxPollInterval, OutboxLease time.Duration
	NATSURL, NATSStream, NATSPrefix string
}

// natsName is what a subject prefix may be: NATS tokens, dot-separated, no
// wildcards; streamName is one token.
var (
	natsName   = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
	streamName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// loadMessages reads OUTBOX_POLL_INTERVAL (1s), OUTBOX_LEASE (15s),
// NATS_URL (none), NATS_STREAM (SHOP) and NATS_SUBJECT_PREFIX (shop).
func (cfg *messageConfig) loadMessages(getenv func(string) string) []error {
	var errs []error
	for _, d := range []struct {
		name, fallback string
		dst            *time.Duration
	}{
		{"OUTBOX_POLL_INTERVAL", "1s", &cfg.OutboxPollInterval},
		{"OUTBOX_LEASE", "15s", &cfg.OutboxLease},
	} {
		v, err := time.ParseDuration(withDefault(getenv(d.name), d.fallback))
		if err != nil || v <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as %s", d.name, getenv(d.name), d.fallback))
		}
		*d.dst = v
	}
	if len(errs) == 0 && cfg.OutboxLease < 2*cfg.OutboxPollInterval {
		errs = append(errs, fmt.Errorf("OUTBOX_LEASE (%s) must be at least twice OUTBOX_POLL_INTERVAL (%s): the relay renews its lease as it polls", cfg.OutboxLease, cfg.OutboxPollInterval))
	}
	cfg.NATSURL = getenv("NATS_URL")
	if u, err := url.Parse(cfg.NATSURL); cfg.NATSURL != "" && (err != nil || u.Host == "") {
		errs = append(errs, fmt.Errorf("NATS_URL=%q: want the NATS server's URL, such as nats://127.0.0.1:4222", cfg.NATSURL))
	}
	cfg.NATSStream = withDefault(getenv("NATS_STREAM"), "SHOP")
	if !streamName.MatchString(cfg.NATSStream) {
		errs = append(errs, fmt.Errorf("NATS_STREAM=%q: want a stream name of letters, digits, - and _", cfg.NATSStream))
	}
	cfg.NATSPrefix = withDefault(getenv("NATS_SUBJECT_PREFIX"), "shop")
	if !natsName.MatchString(cfg.NATSPrefix) {
		errs = append(errs, fmt.Errorf("NATS_SUBJECT_PREFIX=%q: want subject tokens such as shop or acme.shop, no wildcards", cfg.NATSPrefix))
	}
	return errs
}
