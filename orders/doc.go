// Package orders places, reads, cancels and expires orders, and keeps the
// stock their lines reserve and the events their facts record.
package orders
