package tests

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	"gorm.io/gorm"

	"github.com/shop/shop/accounts"
	"github.com/shop/shop/database"
	"github.com/shop/shop/internal/testkit"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/models"
	"github.com/shop/shop/payments"
)

// autoMigrateLastRelease makes the schema as the release before versioned
// migrations did at every start: AutoMigrate on the GORM structs, and the
// order numbers' sequence on PostgreSQL. It stays here, and only here, as
// the reference migration 1 must match.
func autoMigrateLastRelease(t *testing.T, db *gorm.DB) {
	t.Helper()
	err := db.AutoMigrate(&models.User{}, &models.APIToken{}, &lastReleaseProduct{}, &lastReleaseOrder{}, &lastReleaseOrderItem{},
		&models.Payment{}, &models.PaymentAttempt{}, &models.Refund{}, &middleware.IdempotencyKey{},
		&payments.SimulatedCharge{}, &payments.SimulatedRefund{}, &accounts.LoginFailure{}, &accounts.AddressMinute{})
	if err == nil && database.IsPostgres(db) {
		err = db.Exec("CREATE SEQUENCE order_numbers START WITH 1001").Error
	}
	if err != nil {
		t.Fatal(err)
	}
}

// lastReleaseProduct and lastReleaseOrder are the last release's structs
// of the tables later migrations changed (migration 3 gave products their
// stock, orders their cancel reason and restock time).
type lastReleaseProduct struct {
	ID         string `gorm:"primaryKey;size:36"`
	SKU        string `gorm:"size:64;not null;uniqueIndex"`
	Name       string `gorm:"size:200;not null"`
	PriceCents int64  `gorm:"not null"`
	Currency   string `gorm:"size:3;not null"`
}

func (lastReleaseProduct) TableName() string { return "products" }

type lastReleaseOrder struct {
	ID            string                  `gorm:"primaryKey;size:36"`
	Number        int64                   `gorm:"uniqueIndex"`
	UserID        string                  `gorm:"size:36;not null;index:idx_orders_user_created,priority:1"`
	Status        string                  `gorm:"size:24;not null"`
	Currency      string                  `gorm:"size:3;not null"`
	TotalCents    int64                   `gorm:"not null"`
	DerivedKey    string                  `gorm:"size:80;not null;uniqueIndex"`
	Items         []lastReleaseOrderItem  `gorm:"foreignKey:OrderID;constraint:OnDelete:CASCADE"`
	Payments      []models.Payment        `gorm:"foreignKey:OrderID;constraint:OnDelete:CASCADE"`
	Attempts      []models.PaymentAttempt `gorm:"foreignKey:OrderID;constraint:OnDelete:CASCADE"`
	Refunds       []models.Refund         `gorm:"foreignKey:OrderID;constraint:OnDelete:CASCADE"`
	RefundedCents int64                   `gorm:"not null;default:0"`
	HeldBy        *string                 `gorm:"size:100"`
	HeldUntil     *time.Time
	CreatedAt     time.Time `gorm:"not null;index:idx_orders_user_created,priority:2"`
}

func (lastReleaseOrder) TableName() string { return "orders" }

// lastReleaseOrderItem is the last release's line (migration 15 gave it its stock slot).
type lastReleaseOrderItem struct {
	ID             uint   `gorm:"primaryKey"`
	OrderID        string `gorm:"size:36;not null;index"`
	ProductID      string `gorm:"size:36;not null"`
	SKU            string `gorm:"size:64;not null"`
	Name           string `gorm:"size:200;not null"`
	UnitPriceCents int64  `gorm:"not null"`
	Quantity       int    `gorm:"not null"`
}

func (lastReleaseOrderItem) TableName() string { return "order_items" }

// addedTables are the tables migrations after 1 add.
var addedTables = []any{"sessions", "payment_actions", "refund_requests", "events", "inbox", "outbox_leases", "receipts", "webhook_deliveries", "webhook_attempts", "outbox_retries", "stock_slots", "idempotency_replays"}

// addedColumns are the columns migrations after 1 add to the last
// release's tables, with the value each gives the rows already there.
var addedColumns = map[string]map[string]any{
	"products":         {"stock": int64(10000), "held": int64(0), "stock_slots": int64(1)},
	"order_items":      {"slot": int64(0)},
	"orders":           {"cancel_reason": "", "restocked_at": nil, "stock_reserved": false},
	"users":            {"role": "shopper", "pending_orders": int64(0)},
	"refunds":          {"created_by": nil},
	"payment_attempts": {"checked_at": nil},
}

// addedIndexes are the indexes migrations after 1 add to the last
// release's tables.
var addedIndexes = map[string][]string{"orders": {"idx_orders_held_by"}, "events": {"idx_events_type_seq"}}

// schemaQueries describe a schema, leaving out goose's own table: every
// table's and index's definition on SQLite (as SQLite keeps the CREATE
// statement, without IF NOT EXISTS); columns, indexes, constraints and
// sequences on PostgreSQL, named without the schema.
var schemaQueries = map[bool][]string{
	false: {`SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master WHERE tbl_name NOT LIKE 'goose%' AND name != 'sqlite_sequence'`},
	true: {
		`SELECT table_name, column_name, ordinal_position, data_type, COALESCE(character_maximum_length, 0), is_nullable, COALESCE(column_default, '')
		   FROM information_schema.columns WHERE table_schema = current_schema() AND table_name NOT LIKE 'goose%'`,
		`SELECT tablename, indexname, replace(indexdef, current_schema() || '.', '') FROM pg_indexes
		  WHERE schemaname = current_schema() AND tablename NOT LIKE 'goose%'`,
		`SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint
		  WHERE connamespace = current_schema()::regnamespace AND conrelid::regclass::text NOT LIKE 'goose%'`,
		`SELECT sequence_name, data_type, start_value FROM information_schema.sequences
		  WHERE sequence_schema = current_schema() AND sequence_name NOT LIKE 'goose%'`,
	},
}

// schemaOf is the schema as sorted lines, one a column, index, constraint
// or sequence.
func schemaOf(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	var lines []string
	for _, q := range schemaQueries[database.IsPostgres(db)] {
		rows, err := db.Raw(q).Rows()
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a, b, c, d, e, f, g any
			dest := []any{&a, &b, &c, &d, &e, &f, &g}
			cols, _ := rows.Columns()
			if err := rows.Scan(dest[:len(cols)]...); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%v", []any{a, b, c, d, e, f, g}[:len(cols)]))
		}
		rows.Close()
	}
	slices.Sort(lines)
	return lines
}

// A fresh database that migration 1 made has exactly the schema the last
// release's AutoMigrate made: every table, column, type, default, index,
// constraint and sequence, so the two cannot drift apart. The later
// migrations then apply on top of it.
func TestMigrationsMakeTheSchemaAutoMigrateMade(t *testing.T) {
	auto := testkit.NewDB(t)
	autoMigrateLastRelease(t, auto)
	migrated := testkit.NewDB(t)
	migrateTo(t, migrated, 1)
	want, got := schemaOf(t, auto), schemaOf(t, migrated)
	if len(want) < 40 {
		t.Fatalf("the reference schema has %d lines: %q", len(want), want)
	}
	sameLines(t, "migration 1", want, got)
	if err := database.Migrate(migrated); err != nil {
		t.Fatal(err)
	}
	if later := schemaOf(t, migrated); len(later) <= len(got) {
		t.Fatalf("the migrations after 1 add nothing to its %d lines of schema", len(got))
	}
}

// migrateTo applies the shop's migrations, as the source tree has them, up
// to and including version.
func migrateTo(t *testing.T, db *gorm.DB, version int64) {
	t.Helper()
	if _, err := migrations(t, db).UpTo(t.Context(), version); err != nil {
		t.Fatal(err)
	}
}

// migrations is goose's provider of the shop's migrations, as the source
// tree has them, for db's engine: what an operator's goose CLI runs.
func migrations(t *testing.T, db *gorm.DB) *goose.Provider {
	t.Helper()
	dialect, dir := goose.DialectSQLite3, "../database/migrations/sqlite3"
	if database.IsPostgres(db) {
		dialect, dir = goose.DialectPostgres, "../database/migrations/postgres"
	}
	sqlDB, err := db.DB()
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(dialect, sqlDB, os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Rolling migration 16 back (goose down) keeps the replays counted in its
// table: they go back into the keys' own column, which the release before
// it counts in and lists, the key's earlier operations' counts aside.
func TestRollingBackReplayCountsKeepsThem(t *testing.T) {
	dbURL := testkit.URL(t)
	db := testkit.Open(t, dbURL)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, dbURL, db)
	token := e.signUp("rollback@example.com")
	order := request{method: "POST", path: "/api/v1/orders", token: token, key: key("rollback"), body: orderBody(e.productPriced(1900), 1)}
	for range 3 {
		if r := e.do(order); r.Status != http.StatusCreated {
			t.Fatalf("order: %d %s", r.Status, r.Body)
		}
	}
	until(t, "the replays counted", func() bool { return e.count("idempotency_replays", "n = 2") == 1 })
	again := request{method: "POST", path: "/api/v1/orders", token: token, key: key("rollback-stale"), body: orderBody(e.productPriced(1900), 1)}
	if r := e.do(again); r.Status != http.StatusCreated {
		t.Fatalf("order: %d %s", r.Status, r.Body)
	}
	// A count left by an earlier operation of the second key counts for nothing.
	must(t, db.Exec(`INSERT INTO idempotency_replays (key_id, operation_id, n)
SELECT id, 'an-earlier-operation', 9 FROM idempotency_keys WHERE "key" = ?`, "rollback-stale").Error)
	must(t, db.Exec("UPDATE idempotency_keys SET replays = 5").Error) // what the release before counted
	if _, err := migrations(t, db).DownTo(t.Context(), 15); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]int{"rollback": 7, "rollback-stale": 5} {
		var replays []int
		must(t, db.Table("idempotency_keys").Where(`"key" = ?`, k).Pluck("replays", &replays).Error)
		if len(replays) != 1 || replays[0] != want {
			t.Errorf("after rolling migration 16 back, key %s counts %v replays, want [%d]", k, replays, want)
		}
	}
	if db.Migrator().HasTable("idempotency_replays") {
		t.Error("idempotency_replays outlives its migration's Down")
	}
}

// sameLines reports each line that is in only one of want and got.
func sameLines(t *testing.T, what string, want, got []string) {
	t.Helper()
	for _, line := range want {
		if !slices.Contains(got, line) {
			t.Errorf("%s lack: %s", what, line)
		}
	}
	for _, line := range got {
		if !slices.Contains(want, line) {
			t.Errorf("%s add: %s", what, line)
		}
	}
}

// rowsOf is every row of every table, as sorted lines: all but goose's
// table, and SQLite's counters, which count goose's rows too; without the
// columns later migrations added (addedColumns).
func rowsOf(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	tables, err := db.Migrator().GetTables()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, table := range tables {
		if table == "goose_db_version" || table == "sqlite_sequence" {
			continue
		}
		var rows []map[string]any
		if err := db.Table(table).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			for column := range addedColumns[table] {
				delete(r, column)
			}
			lines = append(lines, fmt.Sprintf("%s %v", table, r))
		}
	}
	slices.Sort(lines)
	return lines
}

// rewindToLastRelease makes a database the migrations made, and this
// release used, into one the last release made, its rows kept: without the
// tables, columns and indexes later migrations added, nor goose's table. Its schema is then
// exactly the one the last release's AutoMigrate makes.
func rewindToLastRelease(t *testing.T, db *gorm.DB) {
	t.Helper()
	for table, columns := range addedColumns {
		for column := range columns {
			if err := db.Exec(fmt.Sprintf("ALTER TABLE %s DROP COLUMN %s", table, column)).Error; err != nil {
				t.Fatal(err)
			}
		}
	}
	for table, indexes := range addedIndexes {
		for _, index := range indexes {
			if err := db.Migrator().DropIndex(table, index); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Migrator().DropTable(append(addedTables, "goose_db_version")...); err != nil {
		t.Fatal(err)
	}
	reference := testkit.NewDB(t)
	autoMigrateLastRelease(t, reference)
	sameLines(t, "the rewound schema", schemaOf(t, reference), schemaOf(t, db))
}

// A database the last release made and used — orders, payments, payment
// attempts, and idempotency keys holding their answers — is
// recognised as being at migration 1: migrating it changes no row, and a
// new server replays every stored answer byte for byte.
func TestLastReleaseDatabaseUpgradesInPlace(t *testing.T) {
	dbURL := testkit.URL(t)
	db := testkit.Open(t, dbURL)
	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, dbURL, db)
	// Made on this release's schema (a staff user gives the refund), then
	// rewound to the last release's, which had no roles.
	token, orderID := e.paidOrder("upgrade@example.com", "pm_card_visa")
	declined := e.createOrder(token, "order-declined", orderBody(e.productPriced(1900), 2))
	requests := []request{
		{method: "POST", path: "/api/v1/orders", token: token, key: key("order-upgrade@example.com"), body: orderBody(e.productPriced(1900), 1)},
		e.payRequest(token, orderID, "pay-upgrade@example.com", "pm_card_visa"),
		e.refundRequest(token, orderID, "refund-upgrade", `{"amount_cents":500}`),
		e.payRequest(token, declined, "pay-declined", "pm_card_declined"),
	}
	answers := make([]response, len(requests))
	for i, r := range requests[2:] {
		answers[i+2] = e.do(r)
	}
	for i, r := range requests[:2] { // made by paidOrder: their stored answers
		answers[i] = e.do(r)
	}
	// Their replays reach the rows off the request path, a flush a second:
	// once both have, no flush can land between the two snapshots below.
	until(t, "the replays counted", func() bool { return e.count("idempotency_replays", "n > 0") == 2 })
	if stored := e.count("idempotency_keys", "state = ?", middleware.KeyCompleted); stored != int64(len(requests)+1) {
		t.Fatalf("%d stored answers, want %d (the requests and the declined order)", stored, len(requests)+1)
	}
	rewindToLastRelease(t, db)
	// Each release reads through a pool of its own: PostgreSQL refuses a
	// statement cached before its table changed.
	before := rowsOf(t, testkit.Open(t, dbURL))

	if err := database.Migrate(db); err != nil {
		t.Fatal(err)
	}
	// The upgraded release reads through a pool of its own: PostgreSQL
	// refuses a statement cached before its table changed.
	db = testkit.Open(t, dbURL)
	e.db, e.deps.DB = db, db
	if status, err := database.MigrationStatus(t.Context(), db); err != nil || len(status) == 0 || status[0].State != "applied" {
		t.Fatalf("migration status %v (%v), want migration 1 applied", status, err)
	}
	if len(before) < 20 {
		t.Fatalf("only %d rows before the upgrade: %q", len(before), before)
	}
	sameLines(t, "rows after the upgrade", before, rowsOf(t, db))
	for table, columns := range addedColumns {
		for column, want := range columns {
			var values []any
			if err := db.Table(table).Distinct(column).Pluck(column, &values).Error; err != nil {
				t.Fatal(err)
			}
			if b, ok := want.(bool); ok && len(values) == 1 && fmt.Sprint(values[0]) == fmt.Sprint(map[bool]int{false: 0, true: 1}[b]) {
				continue // SQLite keeps a boolean as 0 or 1
			}
			if len(values) != 1 || fmt.Sprint(values[0]) != fmt.Sprint(want) {
				t.Errorf("%s.%s after the upgrade: %v, want every row %v", table, column, values, want)
			}
		}
	}
	e.makeStaff("upgrade@example.com") // the last release had no roles: staff are named again
	e.ownServer()                      // nothing in memory: answers come from the database
	for i, r := range requests {
		got := e.do(r)
		if !got.replayed() || got.Status != answers[i].Status || !bytes.Equal(got.Body, answers[i].Body) {
			t.Errorf("%s %s after the upgrade: %d %s, want the replay of %d %s", r.method, r.path, got.Status, got.Body, answers[i].Status, answers[i].Body)
		}
	}
	if got := e.count("orders"); got != 2 {
		t.Fatalf("%d orders after the upgrade, want 2", got)
	}
	if r := e.do(request{method: "GET", path: "/api/v1/orders/" + orderID, token: token}); r.Status != http.StatusOK {
		t.Fatalf("the order after the upgrade: %d %s", r.Status, r.Body)
	}
}
