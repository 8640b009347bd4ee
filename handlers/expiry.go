package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/shop/shop/models"
)

// ExpireOrders cancels the orders left unpaid longer than the order expiry,
// on the clock Now, and gives their units back; it returns how many. Every
// instance may run it at once: each order is expired once.
func (s *Server) ExpireOrders(ctx context.Context) (int, error) {
	now := s.deps.Now()
	return s.shop.ExpireOrders(ctx, now.Add(-s.deps.OrderExpiry), now)
}

// cancelledNotice is what a cancelled order's page opens with: why it was
// cancelled, in the shopper's words.
func cancelledNotice(order models.Order, expiry time.Duration, twice string) *notice {
	title := "You cancelled this order."
	switch order.CancelReason {
	case models.CancelledExpired:
		title = fmt.Sprintf("This order was cancelled because it was not paid within %s; its items went back on the shelf.", spanWords(expiry))
	case models.CancelledByStaff:
		title = "The shop's staff cancelled this order."
	}
	return &notice{Kind: noticeSuccess, Title: title, Text: "Nothing was charged. You can place a new order from the catalog.", Also: twice}
}

// spanWords is a duration as a shopper says it: "30 minutes", "1 hour".
func spanWords(d time.Duration) string {
	unit, n := "minute", int64(d/time.Minute)
	switch {
	case d%time.Hour == 0:
		unit, n = "hour", int64(d/time.Hour)
	case d%time.Minute != 0:
		return d.String()
	}
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
