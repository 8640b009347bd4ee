package handlers

import (
	"github.com/gin-gonic/gin"

	"github.com/shop/shop/middleware"
	"github.com/shop/shop/problem"
)

// routes is the whole HTTP surface in one place.
func (s *Server) routes() *gin.Engine {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.Use(s.metrics.observe, gin.CustomRecovery(s.recovered))
	r.NoRoute(func(c *gin.Context) { problem.Write(c, problem.NotFound.With("No such path.")) })
	r.NoMethod(func(c *gin.Context) { problem.Write(c, problem.MethodNotAllowed.With("")) })

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/metrics", s.metrics.handler())
	r.GET("/problems", s.problemIndex)
	r.GET("/problems/:slug", s.problemPage)

	api := r.Group("/api/v1")
	api.POST("/users", s.createUser)
	api.POST("/tokens", s.createToken)
	api.GET("/products", s.listProducts)

	authed := api.Group("", s.requireBearer)
	once := s.idempotency.Require()
	if s.deps.WithoutIdempotency {
		once = middleware.TxOnly(s.deps.DB)
	}
	authed.POST("/orders", once, s.createOrder)
	authed.GET("/orders", s.listOrders)
	authed.GET("/orders/:id", s.getOrder)
	authed.POST("/orders/:id/payments", once, s.createPayment)
	authed.GET("/idempotency-keys", s.listKeys)
	return r
}
