package middleware

// The handler's side of an operation (its contract: the package documentation).

import (
	"crypto/sha256"
	"encoding/hex"
	"sync/atomic"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"
)

const operationKey = "idempotency.operation"

type operation struct {
	key IdempotencyKey    // as claimed: its owner token, operation id, fingerprint and expiry
	raw [sha256.Size]byte // the request's raw digest
	db  *gorm.DB          // bound to a context a client disconnect cannot cancel
	tx  *gorm.DB
	// atomic: the claim is in tx; fresh: this attempt claimed a new operation; notFound: it answered 404.
	atomic, final, fresh, notFound bool
	handedOut                      atomic.Bool // the derived key has left the middleware
	// stopHeartbeat stops the heartbeat and waits: when the transaction begins, and at the end.
	stopHeartbeat func()
}

func current(c *gin.Context) *operation {
	op, ok := c.Get(operationKey)
	if !ok {
		panic("middleware: the route is not behind the idempotency middleware")
	}
	return op.(*operation)
}

// Operation is the current operation as a handler hands it on to a service (one that moves money).
type Operation struct{ op *operation }

// Current is the request's operation.
func Current(c *gin.Context) Operation { return Operation{current(c)} }

// Tx is the transaction of the current operation, begun on first use: the
// middleware commits it with the key's completion, or rolls it back.
func Tx(c *gin.Context) *gorm.DB { return Current(c).Tx() }

// Tx is the operation's transaction; see the function Tx.
func (o Operation) Tx() *gorm.DB {
	if o.op.tx == nil {
		o.op.stopHeartbeat()
		o.op.tx = o.op.db.Begin()
	}
	return o.op.tx
}

// DerivedKey is the key to pass downstream and store on business rows: one per operation.
func DerivedKey(c *gin.Context) string { return Current(c).DerivedKey() }

// DerivedKey is the operation's derived key; see the function DerivedKey.
func (o Operation) DerivedKey() string {
	o.op.handedOut.Store(true)
	return DerivedKeyOf(o.op.key)
}

// Holder names this run of the operation (a retry or a takeover is another): the derived key
// and a token of the run. A hold of the handler's own (a payment's on its order) named by it
// lasts as long as the lease: Config.ExtendHolds extends it with each extension.
// Its token is the owner token's digest: the owner token itself fences the key's row.
func (o Operation) Holder() string {
	run := sha256.Sum256([]byte(o.op.key.OwnerToken))
	return o.DerivedKey() + "/" + hex.EncodeToString(run[:8])
}

// DerivedKeyOf is the derived key of the operation a key row names.
func DerivedKeyOf(k IdempotencyKey) string {
	sum := sha256.Sum256([]byte(k.Scope + "\x00" + k.Key + "\x00" + k.OperationID))
	return "idem_" + hex.EncodeToString(sum[:20])
}

// Final declares the handler's 4xx answer final (a declined card, an
// order already paid): it is stored and replayed rather than released.
func Final(c *gin.Context) { current(c).final = true }

// forgettable: nothing outside can name the operation (new, and its derived key never left, or
// a 404 before anything was done), so a release deletes its row: a refusal leaves nothing behind.
func (op *operation) forgettable() bool {
	return op.fresh && (op.notFound || !op.handedOut.Load())
}

func (op *operation) rollback() {
	if op.tx != nil {
		op.tx.Rollback()
		op.tx = nil
	}
}
