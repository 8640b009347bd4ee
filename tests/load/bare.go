package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/orders"
)

// The statements of a fresh order with the middleware in atomic mode, as
// the app issues them (the middleware's store, orders.CreateOrder with its
// reservation, order number, audit entry and outbox event, and GORM's
// inserts), run straight on the app's connection pool (on SQLite, the read
// on the readers and the transaction on the writer): the key read (a
// miss), then one transaction with the claim, the order number, the audit
// entry, the order, its lines, the order.placed event, the reservation
// (one conditional UPDATE a line, in the products' order, the last write,
// as the app takes it) and the completion. Not run: authentication, the
// product read, the shopper's count of unpaid orders, HTTP and the JSON.
// The app sends the audit entry, the order, its lines and the event
// together, with the reservation on PostgreSQL (database.Chained: one
// statement on PostgreSQL, one Exec then a statement a line on SQLite);
// here each is a statement of its own. What the database can do of this work is the limit the app is
// measured against.
//
// With -bare-writes none, the reservation and the event are left out (the
// rest is the same): the two side by side are the database's price of
// those statements, not the shop's (scripts/bench).
const (
	bareFind = `SELECT id, scope, "key", operation_id, method, route, fingerprint, raw_digest, target, state,
  owner_token, locked_until, status, headers, body, replays, created_at, expires_at FROM idempotency_keys WHERE scope = ? AND "key" = ?`
	bareClaim = `INSERT INTO idempotency_keys
  (scope, "key", operation_id, method, route, fingerprint, raw_digest, target, state, owner_token, locked_until, status, replays, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)
ON CONFLICT (scope, "key") DO UPDATE SET
  operation_id = excluded.operation_id, method = excluded.method, route = excluded.route,
  fingerprint = excluded.fingerprint, raw_digest = excluded.raw_digest, target = excluded.target, state = excluded.state, owner_token = excluded.owner_token,
  locked_until = excluded.locked_until, status = 0, headers = NULL, body = NULL, replays = 0,
  created_at = excluded.created_at, expires_at = excluded.expires_at
WHERE idempotency_keys.expires_at <= excluded.created_at AND (idempotency_keys.state = 'completed' OR idempotency_keys.locked_until <= excluded.created_at)`
	// bareReserve is orders/stock.go's reserve, a line.
	bareReserve = `UPDATE "products" SET "stock"=stock - ? WHERE id = ? AND stock >= ?`
	// The order number, on each database (orders/orders.go productsAndNumber
	// reads it with the products; the bare SQL reads it alone).
	bareNumberSQLite   = `SELECT COALESCE(MAX(number), ?) + 1 FROM orders`
	bareNumberPostgres = `SELECT nextval('order_numbers')`
	// bareAudit is audit.Audit's entry of a placed order.
	bareAudit = `INSERT INTO "audit_entries" ("order_id","action","actor_kind","actor_id","subject_id","amount_cents","reason","at")
VALUES (?,?,?,?,NULL,?,?,?) RETURNING "id"`
	bareOrder = `INSERT INTO "orders" ("id","number","user_id","status","currency","total_cents","derived_key","refunded_cents","held_by","held_until","cancel_reason","restocked_at","stock_reserved","created_at")
VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)`
	bareLines = `INSERT INTO "order_items" ("order_id","product_id","sku","name","unit_price_cents","quantity")
VALUES (?,?,?,?,?,?),(?,?,?,?,?,?) ON CONFLICT ("id") DO UPDATE SET "order_id"="excluded"."order_id" RETURNING "id"`
	// bareEvent is outbox.Record's row of the order.placed event.
	bareEvent    = `INSERT INTO "events" ("id","type","order_id","body","created_at") VALUES (?,?,?,?,?) ON CONFLICT ("id") DO NOTHING RETURNING "seq"`
	bareComplete = `UPDATE idempotency_keys SET state = ?, status = ?, headers = ?, body = ?
WHERE scope = ? AND "key" = ? AND owner_token = ? AND state = ?`
)

// What the bare SQL writes (-bare-writes).
const (
	// bareWritesFull: everything a fresh order writes.
	bareWritesFull = "full"
	// bareWritesNone: no reservation and no outbox event.
	bareWritesNone = "none"
)

// bareFresh places one order of the user's in bare SQL. Its key row holds
// what the app's would: the first order's answer, with this order's id.
func (b *bench) bareFresh(ctx context.Context, userID string) error {
	key, orderID := uuid.NewString(), uuid.Must(uuid.NewV7()).String() // as orders.CreateOrder makes it
	found, err := b.exists(ctx, b.bare.find, userID, key)
	if err != nil || found {
		return fmt.Errorf("find key: found %v, %v", found, err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	owner, hash, raw := uuid.NewString(), strings.Repeat("f", 64), sha256.Sum256([]byte(key))
	writes := b.cfg.BareWrites != bareWritesNone
	p, q := b.pair()
	total := 2*p.PriceCents + q.PriceCents
	firstID := b.first.id()
	headers, err := json.Marshal(b.first.header)
	if err != nil {
		return err
	}
	answer := strings.ReplaceAll(string(b.first.body), firstID, orderID) // the order as the API shows it
	tx, err := begin(ctx, b.pool)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	n, err := rowsAffected(tx.ExecContext(ctx, b.bare.claim,
		userID, key, uuid.NewString(), "POST", "/api/v1/orders", hash, raw[:], hash, "in_progress", owner, now.Add(30*time.Second),
		now, now.Add(24*time.Hour)))
	if err != nil || n != 1 {
		return fmt.Errorf("claim: %d rows, %v", n, err)
	}
	number, err := b.orderNumber(ctx, tx)
	if err != nil {
		return fmt.Errorf("order number: %w", err)
	}
	if err := returning(ctx, tx, b.bare.audit,
		orderID, "order_placed", "shopper", userID, total, "", now); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	ref := "idem_" + strings.ReplaceAll(uuid.NewString(), "-", "") + "01234567" // a derived key's length
	if _, err := tx.ExecContext(ctx, b.bare.order,
		orderID, number, userID, "pending", p.Currency, total, ref, 0, nil, nil, "", nil, writes, now); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	lines, err := tx.QueryContext(ctx, b.bare.lines,
		orderID, p.ID, p.SKU, p.Name, p.PriceCents, 2, orderID, q.ID, q.SKU, q.Name, q.PriceCents, 1)
	if err != nil {
		return fmt.Errorf("order lines: %w", err)
	}
	n = 0
	for lines.Next() {
		n++
	}
	if err := errors.Join(lines.Err(), lines.Close()); err != nil || n != 2 {
		return fmt.Errorf("order lines: %d, %v", n, err)
	}
	if writes {
		id := "order.placed:" + orderID
		body := `{"specversion":"1.0","id":"` + id + `","source":"/shop","type":"order.placed","subject":"` + orderID +
			`","time":"` + now.Format(time.RFC3339Nano) + `","datacontenttype":"application/json","data":` + answer + `}`
		if err := returning(ctx, tx, b.bare.event, id, "order.placed", orderID, body, now); err != nil {
			return fmt.Errorf("event: %w", err)
		}
	}
	if writes {
		lines := []struct {
			id  string
			qty int
		}{{p.ID, 2}, {q.ID, 1}}
		if q.ID < p.ID {
			lines[0], lines[1] = lines[1], lines[0]
		}
		for _, l := range lines {
			n, err := rowsAffected(tx.ExecContext(ctx, b.bare.reserve, l.qty, l.id, l.qty))
			if err != nil || n != 1 {
				return fmt.Errorf("reserve %s: %d rows, %v", l.id, n, err)
			}
		}
	}
	n, err = rowsAffected(tx.ExecContext(ctx, b.bare.complete,
		"completed", b.first.status, strings.ReplaceAll(string(headers), firstID, orderID), []byte(answer),
		userID, key, owner, "in_progress"))
	if err != nil || n != 1 {
		return fmt.Errorf("complete: %d rows, %v", n, err)
	}
	return tx.Commit()
}

// orderNumber reads the next order number through tx, as orders does.
func (b *bench) orderNumber(ctx context.Context, tx txConn) (int64, error) {
	args := []any{}
	if !b.postgres {
		args = append(args, orders.FirstOrderNumber-1)
	}
	var n int64
	rows, err := tx.QueryContext(ctx, b.bare.number, args...)
	if err != nil {
		return 0, err
	}
	if !rows.Next() {
		return 0, errors.Join(errors.New("no row"), rows.Err(), rows.Close())
	}
	return n, errors.Join(rows.Scan(&n), rows.Close())
}

// returning runs an INSERT … RETURNING through tx, as GORM does, and
// reads its row, if any.
func returning(ctx context.Context, tx txConn, query string, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	return errors.Join(rows.Err(), rows.Close())
}

// exists runs a query and reports whether it found a row.
func (b *bench) exists(ctx context.Context, query string, args ...any) (bool, error) {
	rows, err := b.pool.QueryContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	found := rows.Next()
	return found, errors.Join(rows.Err(), rows.Close())
}

func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// pool is the app's connection pool as GORM holds it: *sql.DB on
// PostgreSQL, the writer and readers on SQLite (whose transactions share
// commits: models/groupcommit.go).
type pool interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// txConn is a transaction of either pool.
type txConn interface {
	gorm.ConnPool
	gorm.TxCommitter
}

// begin begins a transaction on p, as GORM does.
func begin(ctx context.Context, p pool) (txConn, error) {
	switch b := p.(type) {
	case gorm.TxBeginner:
		return b.BeginTx(ctx, nil)
	case gorm.ConnPoolBeginner:
		tx, err := b.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return tx.(txConn), nil
	}
	return nil, fmt.Errorf("no transactions on %T", p)
}

// bareSQL is the statements, in the database's placeholders.
type bareSQL struct{ find, claim, reserve, number, audit, order, lines, event, complete string }

func newBareSQL(postgres bool) bareSQL {
	r := func(query string) string { return rebind(postgres, query) }
	number := bareNumberSQLite
	if postgres {
		number = bareNumberPostgres
	}
	return bareSQL{r(bareFind), r(bareClaim), r(bareReserve), r(number), r(bareAudit), r(bareOrder), r(bareLines), r(bareEvent), r(bareComplete)}
}

// rebind turns ? placeholders into PostgreSQL's $n.
func rebind(postgres bool, query string) string {
	if !postgres {
		return query
	}
	var sb strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			sb.WriteString("$" + strconv.Itoa(n))
			continue
		}
		sb.WriteRune(r)
	}
	return sb.String()
}
