package config

import (
	"strings"
	"testing"
	"time"
)

// messageConfig is the settings of the outbox's relay and its publisher.
type messageConfig struct {
	OutboxPollInterval, OutboxLease time.Duration
	NATSURL, NATSStream, NATSPrefix string
}

func messages(c Config) messageConfig {
	return messageConfig{c.OutboxPollInterval, c.OutboxLease, c.NATSURL, c.NATSStream, c.NATSPrefix}
}

func TestMessageSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want messageConfig
		err  string
	}{
		{nil, messageConfig{OutboxPollInterval: time.Second, OutboxLease: 15 * time.Second, NATSStream: "SHOP", NATSPrefix: "shop"}, ""},
		{map[string]string{"NATS_URL": "nats://127.0.0.1:4222", "NATS_STREAM": "ORDERS", "NATS_SUBJECT_PREFIX": "acme.shop", "OUTBOX_POLL_INTERVAL": "200ms", "OUTBOX_LEASE": "1s"},
			messageConfig{OutboxPollInterval: 200 * time.Millisecond, OutboxLease: time.Second, NATSURL: "nats://127.0.0.1:4222", NATSStream: "ORDERS", NATSPrefix: "acme.shop"}, ""},
		{map[string]string{"OUTBOX_POLL_INTERVAL": "0"}, messageConfig{}, "OUTBOX_POLL_INTERVAL"},
		{map[string]string{"OUTBOX_LEASE": "soon"}, messageConfig{}, "OUTBOX_LEASE"},
		{map[string]string{"OUTBOX_POLL_INTERVAL": "10s", "OUTBOX_LEASE": "15s"}, messageConfig{}, "at least twice"},
		{map[string]string{"NATS_URL": "127.0.0.1"}, messageConfig{}, "NATS_URL"},
		{map[string]string{"NATS_STREAM": "a.b"}, messageConfig{}, "NATS_STREAM"},
		{map[string]string{"NATS_SUBJECT_PREFIX": "shop.>"}, messageConfig{}, "NATS_SUBJECT_PREFIX"},
	} {
		cfg, err := Load(func(name string) string { return tc.env[name] })
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.err)
		case tc.err == "" && (err != nil || messages(cfg) != tc.want):
			t.Errorf("%v: %+v, %v; want %+v", tc.env, messages(cfg), err, tc.want)
		}
	}
}
