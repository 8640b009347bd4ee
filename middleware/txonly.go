package middleware

import (
	"context"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/shop/shop/models"
)

// TxOnly runs the handler the way it would run without idempotency: no key,
// no claim, no stored answer, only the transaction Tx hands out, committed
// when the answer is a success and then sent. It is the benchmark baseline:
// it exists to measure what the idempotency middleware costs on top of the
// same handler (BenchmarkWithoutMiddleware, and the load harness through
// handlers.NewBaselineServer); no route the shop serves uses it.
func TxOnly(db *gorm.DB) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := context.WithoutCancel(c.Request.Context())
		c.Request = c.Request.WithContext(ctx)
		op := &operation{key: models.IdempotencyKey{OperationID: uuid.NewString(), Route: c.FullPath()}, db: db.WithContext(ctx), stopHeartbeat: func() {}}
		c.Set(operationKey, op)
		real := c.Writer
		rec := newRecorder(real)
		c.Writer = rec
		defer func() {
			c.Writer = real
			if p := recover(); p != nil {
				op.rollback()
				panic(p)
			}
		}()
		c.Next()
		c.Writer = real
		if rec.status >= 400 && !op.final {
			op.rollback()
		} else if op.tx != nil {
			if err := op.tx.Commit().Error; err != nil {
				c.AbortWithStatus(500)
				return
			}
		}
		send(c.Writer, rec.header, "", rec.status, rec.body.Bytes())
	}
}
