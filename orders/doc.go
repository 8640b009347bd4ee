// Package orders places, reads and ends orders: the catalog and its stock,
// cancel and expiry as one rule, the order's hold that the payments service
// takes, and the order's events.
package orders
