package config

import (
	"strings"
	"testing"
)

// A webhook secret not in the whsec_<base64> form, or missing beside a
// WEBHOOK_URL, is a startup error naming WEBHOOK_SECRET; so are a bad
// SMTP_URL and WEBHOOK_MAX_ATTEMPTS. Left unset, receipts go to data/mail
// and there are no webhooks.
func TestNotifySettings(t *testing.T) {
	const hook = "http://127.0.0.1:9/hooks"
	for _, tc := range []struct {
		env map[string]string
		err string
	}{
		{map[string]string{}, ""},
		{map[string]string{"WEBHOOK_URL": hook, "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, ""},
		{map[string]string{"SMTP_URL": "smtp://127.0.0.1:2525"}, ""},
		{map[string]string{"WEBHOOK_URL": hook}, "WEBHOOK_SECRET"},
		{map[string]string{"WEBHOOK_URL": hook, "WEBHOOK_SECRET": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "WEBHOOK_SECRET"},
		{map[string]string{"WEBHOOK_URL": hook, "WEBHOOK_SECRET": "whsec_not*base64"}, "WEBHOOK_SECRET"},
		{map[string]string{"WEBHOOK_URL": "ftp://x", "WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "WEBHOOK_URL"},
		{map[string]string{"SMTP_URL": "http://127.0.0.1:2525"}, "SMTP_URL"},
		{map[string]string{"WEBHOOK_MAX_ATTEMPTS": "0"}, "WEBHOOK_MAX_ATTEMPTS"},
		{map[string]string{"WEBHOOK_BACKOFF": "soon"}, "WEBHOOK_BACKOFF"},
	} {
		cfg, err := Load(func(name string) string { return tc.env[name] })
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: error %v, want one naming %s", tc.env, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.err == "" && (cfg.MailDir != "data/mail" || cfg.WebhookMaxAttempts != 8 || (cfg.WebhookURL != "") != (len(cfg.WebhookKey) == 24)):
			t.Errorf("%v: %+v", tc.env, cfg)
		}
	}
}
