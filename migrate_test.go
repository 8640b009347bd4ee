package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/shop/shop/internal/testkit"
)

// `shop migrate status` lists migration 1 as pending on an empty database,
// `shop migrate` applies it and says when, and a verb it does not know is
// refused with the usage; none of them serves.
func TestMigrateCommand(t *testing.T) {
	env := map[string]string{"DATABASE_URL": testkit.URL(t)}
	shop := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"shop"}, args...), func(k string) string { return env[k] }, &out)
		return out.String(), err
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "status"}, "00001  pending"},
		{[]string{"migrate"}, "00001  applied "},
		{[]string{"migrate", "up"}, "00001  applied "},
		{[]string{"migrate", "status"}, "00001  applied "},
	} {
		out, err := shop(step.args...)
		if err != nil || !strings.HasPrefix(out, step.want) || !strings.Contains(out, "00001_baseline.sql") {
			t.Fatalf("shop %s: %q (%v), want %q… 00001_baseline.sql", strings.Join(step.args, " "), out, err, step.want)
		}
	}
	if _, err := shop("migrate", "down"); err == nil || !strings.Contains(err.Error(), "usage: shop migrate [up|status]") {
		t.Fatalf("shop migrate down: %v, want the usage", err)
	}
}
