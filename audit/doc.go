// Package audit records who did what: one entry per act, written in the
// act's own transaction with its actor, read back as an order's history, a
// shopper's activity and the traces of a user's operations.
package audit
