package handlers

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/shop/shop/handlers/views"
	"github.com/shop/shop/httpkit"
	"github.com/shop/shop/internal/tracing"
	"github.com/shop/shop/middleware"
	"github.com/shop/shop/payments"
	"github.com/shop/shop/problem"
	"github.com/shop/shop/static"
	"github.com/shop/shop/templates"
)

// apiPrefix is where the JSON API is mounted: the only paths other origins may call.
const apiPrefix = "/api/v1"

// routes is the whole HTTP surface; once makes a route idempotent,
// onceAtomic one whose claim commits with its database writes.
func (s *Server) routes(once, onceAtomic gin.HandlerFunc) *gin.Engine {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	httpkit.TrustProxies(r, s.deps.TrustedProxies)
	if tracing.On(s.deps.Tracer) {
		r.Use(tracing.Requests(s.deps.Tracer)) // first: every span of the request is under its own
	}
	r.Use(httpkit.RequestID, httpkit.AccessLog(s.deps.Logger, func(c *gin.Context) string { return currentUser(c).ID }),
		s.metrics.Observe, gin.CustomRecovery(s.recovered), httpkit.SecurityHeaders(httpkit.PagePolicy))
	if len(s.deps.CORSOrigins) > 0 {
		r.Use(httpkit.CrossOriginAPI(apiPrefix, s.deps.CORSOrigins)) // before every route's own middleware: a preflight has no token
	}
	r.NoRoute(s.asPage, func(c *gin.Context) { s.fail(c, problem.NotFound.With("")) })
	r.NoMethod(s.asPage, func(c *gin.Context) { s.fail(c, problem.MethodNotAllowed.With("")) })
	r.GET("/healthz", httpkit.Healthz)
	r.GET("/readyz", httpkit.Readyz(s.deps.DB, &middleware.IdempotencyKey{}))
	r.GET("/metrics", s.metrics.Handler(s.deps.MetricsToken))
	r.GET("/static/*file", s.static(http.FileServerFS(static.FS)))
	r.GET("/openapi.json", httpkit.OpenAPIJSON)
	r.GET("/openapi.yaml", httpkit.OpenAPIYAML)
	r.GET("/docs/api", httpkit.SecurityHeaders(httpkit.ReferencePolicy), httpkit.APIReference)

	// The browser: session cookie, forms, cross-origin posts refused.
	web := r.Group("", s.loadSession, s.refuseCrossOrigin)
	web.GET("/", s.home)
	web.GET("/how-it-works", s.howItWorks)
	web.GET("/problems", s.problemPage)
	web.GET("/problems/:slug", s.problemPage)
	web.GET("/signup", s.credentialsPage("signup.html"))
	web.POST("/signup", s.throttleAddress, limitBody, middleware.OptionalKey, once, s.createUser)
	web.GET("/login", s.credentialsPage("login.html"))
	web.POST("/login", s.throttleAddress, limitBody, s.createToken)
	web.POST("/logout", s.logout)
	web.GET(payments.AuthPath+":charge", s.authenticationPage)
	web.POST(payments.AuthPath+":charge", limitBody, s.authenticate)
	shopper := web.Group("", s.requireSession)
	shopper.POST("/orders", s.markRepeats(views.RepeatedOrder), onceAtomic, s.createOrder)
	shopper.GET("/orders", s.listOrders)
	shopper.GET("/orders/:id", s.getOrder)
	shopper.GET("/orders/:id/receipt", s.receiptPage)
	shopper.POST("/orders/:id/payments", s.markRepeats(views.RepeatedPayment), once, s.createPayment)
	shopper.POST("/orders/:id/refund-requests", onceAtomic, s.createRefundRequest)
	shopper.POST("/orders/:id/cancel", s.markRepeats(views.RepeatedCancel), onceAtomic, s.cancelOrder)
	shopper.GET("/account", s.accountPage)
	shopper.GET("/account/password", s.passwordPage)
	shopper.POST("/account/password", once, s.changePassword)
	s.consoleRoutes(web.Group("/staff", s.requireStaff), once, onceAtomic)

	// The JSON API: bearer tokens.
	api := r.Group(apiPrefix, s.jsonObjects)
	api.POST("/users", s.throttleAddress, middleware.OptionalKey, once, s.createUser)
	api.POST("/tokens", s.throttleAddress, s.createToken)
	api.GET("/products", s.listProducts)
	authed := api.Group("", s.requireBearer)
	authed.GET("/me", s.me)
	authed.DELETE("/tokens/current", s.revokeToken)
	authed.POST("/orders", onceAtomic, s.createOrder)
	authed.GET("/orders", s.listOrders)
	authed.GET("/orders/:id", s.getOrder)
	authed.POST("/orders/:id/payments", once, s.createPayment)
	authed.GET("/orders/:id/payments/:payment_id", s.getPayment)
	authed.POST("/orders/:id/refunds", s.requireStaff, once, s.createRefund) // refused before the key is claimed
	authed.GET("/orders/:id/refunds/:refund_id", s.getRefund)
	authed.POST("/orders/:id/refund-requests", onceAtomic, s.createRefundRequest)
	authed.POST("/orders/:id/cancel", onceAtomic, s.cancelOrder)
	authed.GET("/idempotency-keys", s.listKeys)
	authed.GET("/webhook-deliveries", s.requireStaff, s.listWebhookDeliveries)
	authed.POST("/webhook-deliveries/:id/redeliver", s.requireStaff, onceAtomic, s.redeliverWebhook)
	staff := authed.Group("/staff", s.requireStaff)
	staff.GET("/orders", s.staffListOrders)
	staff.GET("/orders/:id", s.staffGetOrder)
	staff.GET("/parked-events", s.listParkedEvents)
	staff.POST("/parked-events/:consumer/:event_id/retry", onceAtomic, s.retryParkedEvent)

	// Stripe's webhook deliveries: verified, then once per event id.
	if s.deps.StripeWebhookSecret != "" {
		r.POST("/webhooks/stripe", s.verifyStripeEvent, once, s.stripeEvent)
	}
	return r
}

// consoleRoutes are the staff console's, behind requireStaff.
func (s *Server) consoleRoutes(console *gin.RouterGroup, once, onceAtomic gin.HandlerFunc) {
	console.GET("", s.staffListOrders)
	console.GET("/orders/:id", s.staffGetOrder)
	console.POST("/orders/:id/refunds", s.markRepeats(templates.ActRefunded+templates.Again), once, s.createRefund)
	console.POST("/orders/:id/refund-requests/:request_id/decline", s.markRepeats(templates.ActDeclined+templates.Again), onceAtomic, s.staffDecline)
	console.POST("/orders/:id/cancel", s.markRepeats(templates.ActCancelled+templates.Again), onceAtomic, s.staffCancel)
	console.GET("/products", s.staffProductsPage)
	console.POST("/products/stock", onceAtomic, s.staffRestock)
	console.GET("/in-doubt", s.staffDoubtsPage)
	console.POST("/in-doubt/:kind/:request_id", once, s.staffAskProvider)
	console.GET("/parked", s.listParkedEvents)
	console.POST("/parked/:consumer/:event_id/retry", onceAtomic, s.retryParkedEvent)
	console.GET("/webhooks", s.staffDeliveriesPage)
	console.GET("/webhooks/:delivery_id", s.staffDeliveriesPage)
	console.POST("/webhooks/:delivery_id/redeliver", s.markRepeats(redelivered+templates.Again), onceAtomic, s.staffRedeliver)
}

// asPage makes the answer for an unknown path a page, except under the API's.
func (s *Server) asPage(c *gin.Context) {
	if !strings.HasPrefix(c.Request.URL.Path, "/api/") {
		s.loadSession(c)
	}
}

// limitBody bounds the forms that are not behind the middleware's own bound.
func limitBody(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, middleware.MaxBodyBytes)
}

func (s *Server) static(files http.Handler) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Cache-Control", "public, max-age=3600")
		c.Request.URL.Path = c.Param("file")
		files.ServeHTTP(c.Writer, c.Request)
	}
}
