package admin

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/models"
)

// staff runs `shop staff add|remove EMAIL`: it makes an existing
// user staff, or a shopper again, and exits without serving. Both are
// idempotent; an email no user has is an error. It is the only way anyone
// becomes staff: nothing on the web does it.
func staff(ctx context.Context, dbs Databases, args []string, stdout io.Writer) error {
	roles := map[string]models.Role{"add": models.Staff, "remove": models.Shopper}
	if len(args) != 2 || roles[args[0]] == "" {
		return errors.New("usage: shop staff add|remove EMAIL")
	}
	db, closeDB, err := dbs.Prepare()
	if err != nil {
		return err
	}
	defer closeDB()
	role := roles[args[0]]
	changed, err := accounts.SetRole(ctx, db, args[1], role)
	if err != nil {
		return err
	}
	already := ""
	if !changed {
		already = " already"
	}
	fmt.Fprintf(stdout, "%s is%s %s\n", args[1], already, role)
	return nil
}
