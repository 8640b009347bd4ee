package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/shop/shop/database"
	"github.com/shop/shop/httpkit"
)

// statements records what one request sends the database: each statement
// GORM runs with the request's id in its context, as "VERB table", and the
// transactions they ran in.
type statements struct {
	mu   sync.Mutex
	id   string // the request whose statements are counted; "" while none
	seen []string
	txs  map[gorm.ConnPool]bool
}

// countStatements counts, from now on, the statements of the request the
// recorder is given (expect) on db.
func countStatements(t *testing.T, db *gorm.DB) *statements {
	t.Helper()
	s := &statements{txs: map[gorm.ConnPool]bool{}}
	note := func(tx *gorm.DB) {
		if tx.DryRun || tx.Statement.SQL.Len() == 0 { // a dry run is sent in a batch
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.id == "" || httpkit.RequestIDOf(tx.Statement.Context) != s.id {
			return
		}
		what := statementName(tx.Statement.SQL.String())
		if _, inTx := tx.Statement.ConnPool.(gorm.TxCommitter); inTx {
			s.txs[tx.Statement.ConnPool] = true
		}
		s.seen = append(s.seen, what)
	}
	cb := db.Callback()
	for _, err := range []error{
		cb.Create().After("gorm:create").Before("gorm:save_after_associations").Register("cost:create", note),
		cb.Query().After("gorm:query").Register("cost:query", note),
		cb.Update().After("gorm:update").Register("cost:update", note),
		cb.Delete().After("gorm:delete").Register("cost:delete", note),
		cb.Row().After("gorm:row").Register("cost:row", note),
		cb.Raw().After("gorm:raw").Register("cost:raw", note),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// statementName is a statement's verb and the table it names first
// ("INSERT orders"), the tables a SELECT or WITH reads or writes ("SELECT
// orders, products"), or its first call ("SELECT nextval"); an Exec of
// several statements (SQLite's batch) is theirs, joined by "; ".
func statementName(sql string) string {
	if several := strings.Split(sql, ";"); len(several) > 1 {
		names := make([]string, len(several))
		for i, one := range several {
			names[i] = statementName(one)
		}
		return strings.Join(names, "; ")
	}
	words := strings.Fields(sql)
	verb := strings.ToUpper(words[0])
	if verb == "WITH" || verb == "SELECT" { // the tables it writes, or else reads
		tables := append(tablesAfter(words, "INTO"), tablesAfter(words, "UPDATE")...)
		if tables == nil {
			tables = tablesAfter(words, "FROM")
		}
		if tables != nil {
			return verb + strings.Join(tables, ",")
		}
	}
	for i, w := range words[:len(words)-1] {
		if strings.EqualFold(w, "FROM") || strings.EqualFold(w, "INTO") || i == 0 && strings.EqualFold(w, "UPDATE") {
			return strings.ToUpper(words[0]) + " " + strings.Trim(words[i+1], "`\"")
		}
	}
	call, _, _ := strings.Cut(words[1], "(")
	return strings.ToUpper(words[0]) + " " + call
}

// tablesAfter are the tables a statement names after keyword (INTO: the
// tables it inserts into; UPDATE, but ON CONFLICT's DO UPDATE SET and a
// lock's FOR UPDATE: the tables it updates), each " table".
func tablesAfter(words []string, keyword string) []string {
	var tables []string
	for i, w := range words[:len(words)-1] {
		table := strings.Trim(words[i+1], "`\",()")
		locks := i > 0 && strings.EqualFold(words[i-1], "FOR")
		if strings.EqualFold(strings.TrimLeft(w, "("), keyword) && !strings.EqualFold(table, "SET") && !locks {
			tables = append(tables, " "+table)
		}
	}
	return tables
}

// of sends r with the request id id and returns its answer, the
// statements it sent and the transactions they ran in.
func (s *statements) of(e *env, id string, r request) (response, []string, int) {
	e.t.Helper()
	s.mu.Lock()
	s.id, s.seen, s.txs = id, nil, map[gorm.ConnPool]bool{}
	s.mu.Unlock()
	r.header = http.Header{httpkit.RequestIDHeader: {id}}
	answer := e.do(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	seen, txs := s.seen, len(s.txs)
	s.id = ""
	return answer, seen, txs
}

// A fresh order of two lines costs, on each engine, the statements listed
// here and no more, in one transaction: a new statement in the order's path
// fails this test, and is added here only on purpose. The stock
// reservation is the last write before the completion, so that a hot
// product's row is locked for the least time: on PostgreSQL it rides in the
// statement of the order's inserts.
func TestFreshOrderStatementCost(t *testing.T) {
	e := newEnv(t)
	token := e.signUp("cost@example.com")
	ids := e.products()
	e.createOrder(token, "warm-up", orderBody(ids[0], 1)) // the token, read once, is then in memory
	s := countStatements(t, e.db)

	want := map[bool][]string{
		false: {
			"SELECT idempotency_keys", // the key: a miss
			"INSERT idempotency_keys", // the claim, in the order's transaction
			"UPDATE users",            // the shopper's count of unpaid orders
			"SELECT orders, products", // the order number (the highest plus one) and the products
			// one Exec of four inserts, both lines in one
			"INSERT audit_entries; INSERT orders; INSERT order_items; INSERT events",
			"UPDATE products", "UPDATE products", // the reservation, a line each
			"UPDATE idempotency_keys", // the completion
		},
		true: {
			"SELECT idempotency_keys",
			"INSERT idempotency_keys",
			"WITH users", // the shopper's count of unpaid orders, in the statement that reads nextval and the products
			// one statement: the inserts, then the reservation, a line each, in product id order
			"WITH audit_entries, orders, order_items, events, products, products",
			"UPDATE idempotency_keys",
		},
	}[database.IsPostgres(e.db)]
	k := "fresh"
	r, got, txs := s.of(e, "cost-fresh", request{method: "POST", path: "/api/v1/orders", token: token, key: &k, body: orderBody(ids[0], 2, ids[1], 1)})
	if r.Status != http.StatusCreated {
		t.Fatalf("fresh order: %d %s", r.Status, r.Body)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || txs != 1 {
		t.Fatalf("a fresh order sent %d statements in %d transactions:\n  %s\nwant %d in 1:\n  %s",
			len(got), txs, strings.Join(got, "\n  "), len(want), strings.Join(want, "\n  "))
	}
	t.Logf("a fresh order: %d statements, %d of them in its transaction", len(got), len(got)-1)

	// Its replay, from this instance's memory, touches no database.
	again, got, txs := s.of(e, "cost-replay", request{method: "POST", path: "/api/v1/orders", token: token, key: &k, body: orderBody(ids[0], 2, ids[1], 1)})
	if !again.replayed() || again.Status != http.StatusCreated || len(got) != 0 || txs != 0 {
		t.Fatalf("the replay: %d, replayed %v; it sent %v in %d transactions, want none", again.Status, again.replayed(), got, txs)
	}
}
