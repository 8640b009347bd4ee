package main

import (
	"context"
	"log/slog"

	"github.com/shop/shop/handlers"
)

// expireOrders cancels the orders left unpaid past ORDER_EXPIRY and gives
// their units back, at each sweep of every instance: each order once.
func expireOrders(ctx context.Context, srv *handlers.Server, logger *slog.Logger) {
	if n, err := srv.ExpireOrders(ctx); err != nil && ctx.Err() == nil {
		logger.Error("expire unpaid orders", "err", err)
	} else if n > 0 {
		logger.Info("expired unpaid orders, their units back in stock", "expired", n)
	}
}
