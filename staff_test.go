package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/models"
)

// `shop staff add EMAIL` makes an existing user staff and `shop staff
// remove EMAIL` a shopper again; each said twice changes nothing more, an
// email no user has is an error (exit status 1) that changes nothing, and
// a verb it does not know is refused with the usage. None of them serves.
func TestStaffCommand(t *testing.T) {
	dbURL := testkit.URL(t)
	env := map[string]string{"DATABASE_URL": dbURL}
	shop := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"shop"}, args...), func(k string) string { return env[k] }, &out)
		return out.String(), err
	}
	if _, err := shop("migrate"); err != nil {
		t.Fatal(err)
	}
	db := testkit.Open(t, dbURL)
	accounts, err := accounts.NewAccounts(db, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, email := range []string{"owner@example.com", "shopper@example.com"} {
		if _, err := accounts.SignUp(t.Context(), email, "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	roles := func() map[string]models.Role {
		var users []models.User
		if err := db.Order("email").Find(&users).Error; err != nil {
			t.Fatal(err)
		}
		got := map[string]models.Role{}
		for _, u := range users {
			got[u.Email] = u.Role
		}
		return got
	}
	for _, step := range []struct {
		args  []string
		out   string
		owner models.Role
	}{
		{[]string{"staff", "add", "Owner@Example.com"}, "is staff", models.Staff},
		{[]string{"staff", "add", "owner@example.com"}, "is already staff", models.Staff},
		{[]string{"staff", "remove", "owner@example.com"}, "is shopper", models.Shopper},
		{[]string{"staff", "remove", "owner@example.com"}, "is already shopper", models.Shopper},
		{[]string{"staff", "add", "owner@example.com"}, "is staff", models.Staff},
	} {
		out, err := shop(step.args...)
		want := map[string]models.Role{"owner@example.com": step.owner, "shopper@example.com": models.Shopper}
		if got := roles(); err != nil || !strings.Contains(out, step.out) || got["owner@example.com"] != want["owner@example.com"] || got["shopper@example.com"] != models.Shopper {
			t.Fatalf("shop %s: %q (%v), roles %v; want %q and %v", strings.Join(step.args, " "), out, err, got, step.out, want)
		}
	}
	for _, args := range [][]string{{"staff", "add", "nobody@example.com"}, {"staff", "remove", "nobody@example.com"}} {
		if _, err := shop(args...); err == nil || !strings.Contains(err.Error(), `no user has the email "nobody@example.com"`) {
			t.Fatalf("shop %s: %v, want that no user has the email", strings.Join(args, " "), err)
		}
	}
	if n := len(roles()); n != 2 {
		t.Fatalf("%d users after the unknown emails, want 2", n)
	}
	for _, args := range [][]string{{"staff"}, {"staff", "promote", "owner@example.com"}, {"staff", "add"}} {
		if _, err := shop(args...); err == nil || !strings.Contains(err.Error(), "usage: shop staff add|remove EMAIL") {
			t.Fatalf("shop %s: %v, want the usage", strings.Join(args, " "), err)
		}
	}
	if got := roles()["owner@example.com"]; got != models.Staff {
		t.Fatalf("the owner is %q after the refused commands, want staff", got)
	}
}
