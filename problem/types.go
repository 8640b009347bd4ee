package problem

import "net/http"

//go:generate go run gen_refusals.go

// The problem types of this service, each with a page at its URI; the
// middleware's refusals take slug, status and title from refusals_gen.go.
var (
	KeyMissing = refuseIdempotencyKeyMissing.documented(
		"This endpoint changes state, so it requires an idempotency key: an `Idempotency-Key` header (or, for an HTML form, a hidden `idempotency_key` field). Generate one random key (a UUID v4 is ideal) for each operation and send the same key on every retry of that operation. Nothing was done.")
	KeyInvalid = refuseIdempotencyKeyInvalid.documented(
		"The key must be an RFC 8941 string (`\"…\"`) or a bare value of printable ASCII without spaces, quotes or commas; 1 to 255 characters once decoded; one value only, without parameters. An HTML form's hidden field, when present, is the key: a header beside it is ignored. Nothing was done.")
	KeyReused = refuseIdempotencyKeyReused.documented(
		"This key was already used for a request with a different method, path, query or body. A key names one operation: a retry must repeat the original request exactly (JSON key order and whitespace do not matter). Use a new key for a new operation. Nothing was done.")
	KeyInProgress = refuseIdempotencyKeyInProgress.documented(
		"The original request with this key is still running and did not finish within the wait. Retry after the number of seconds in `Retry-After` with the same key: you will get the original answer, replayed.")
	KeyLeaseLost = refuseIdempotencyLeaseLost.documented(
		"This attempt ran past its lease and another attempt with the same key took over; this attempt's writes were rolled back. Retry with the same key to get the outcome of the attempt that finished.")
	TooLarge = refuseRequestTooLarge.documented(
		"Request bodies are limited to 1 MiB. Nothing was done.")
	UnsupportedMediaType = Type{"unsupported-media-type", http.StatusUnsupportedMediaType, "Unsupported media type",
		"This endpoint accepts `application/json` request bodies. Nothing was done."}
	MalformedRequest = refuseMalformedRequest.documented(
		"The request body could not be read: it is not valid JSON (duplicate object keys, or keys differing only in case, included), or it does not have the shape this endpoint expects. Nothing was done.")
	InvalidParameter = Type{"invalid-parameter", http.StatusBadRequest, "Invalid query parameter",
		"A query parameter is out of its range: `limit` must be a whole number from 1 to 100, and `after` must be a `next_cursor` the same listing returned. Nothing was done."}
	Validation = Type{"validation", http.StatusUnprocessableEntity, "Validation failed",
		"Some fields break the rules listed in `errors`. Nothing was done and nothing was remembered: correct the request and send it again, with the same idempotency key if you like."}
	Unauthorized = refuseUnauthorized.documented(
		"Send `Authorization: Bearer <token>` with a token from `POST /api/v1/tokens`. Idempotency keys belong to the authenticated user, so the token is checked before the key.")
	BadCredentials = Type{"bad-credentials", http.StatusUnauthorized, "Wrong email or password",
		"The email or password is wrong."}
	TokenExpired = Type{"token-expired", http.StatusUnauthorized, "Token expired",
		"The bearer token is past its expiry (`expires_at` in the answer of `POST /api/v1/tokens`; 30 days by default, `TOKEN_TTL`). Get a new token from `POST /api/v1/tokens`. Nothing was done."}
	TokenRevoked = Type{"token-revoked", http.StatusUnauthorized, "Token revoked",
		"The bearer token was revoked with `DELETE /api/v1/tokens/current`. Get a new token from `POST /api/v1/tokens`. Nothing was done."}
	NotFound = Type{"not-found", http.StatusNotFound, "Not found",
		"There is nothing here, or it belongs to another account."}
	EmailTaken = Type{"email-taken", http.StatusConflict, "Email already registered",
		"An account with this email already exists. Log in instead."}
	OrderPaid = Type{"order-already-paid", http.StatusConflict, "Order already paid",
		"The order is paid; it cannot be paid again, nor cancelled."}
	PaymentInProgress = Type{"payment-in-progress", http.StatusConflict, "Another payment of this order is in progress",
		"Another payment operation (with a different idempotency key) holds this order. Retry after `Retry-After` seconds."}
	PaymentDeclined = Type{"payment-declined", http.StatusPaymentRequired, "Payment declined",
		"The provider declined the payment method. The attempt is recorded on the order. Use a new key to try another payment method."}
	ProviderUnavailable = Type{"payment-provider-unavailable", http.StatusBadGateway, "Payment provider unavailable",
		"The payment provider failed or did not answer. The key was released: retry with the same key. The provider is called with a key derived from yours, so a retry never charges twice, even if the failed attempt was charged."}
	PaymentUnconfirmed = Type{"payment-unconfirmed", http.StatusBadGateway, "Payment not confirmed yet",
		"The payment provider did not say whether a payment of this order went through (its answer was lost, or it could not answer the shop's question about an earlier payment). The payment is being confirmed: no other payment of the order can be charged until the provider has said, and nothing more was charged by this request. The key was released: retry with the same key to learn the outcome; the order's `attempts` show `in_doubt` meanwhile."}
	WebhookSignature = Type{"webhook-signature-invalid", http.StatusBadRequest, "Webhook signature invalid",
		"The `Stripe-Signature` header is missing, does not verify the payload with the endpoint's signing secret, or is older than the tolerance (5 minutes). Nothing was done."}
	WebhookAPIVersion = Type{"webhook-api-version", http.StatusBadRequest, "Webhook event of another API version",
		"The delivery is correctly signed, but its event is rendered in a Stripe API version this server does not read, so its objects could be read wrong. Nothing was done. Set the webhook endpoint's API version to the one the server's stripe-go pins; Stripe then delivers the event again in that version."}
	OrderCancelled = Type{"order-cancelled", http.StatusConflict, "Order cancelled",
		"The order was cancelled, so it cannot be paid; nothing was charged."}
	OrderNotPaid = Type{"order-not-paid", http.StatusConflict, "Order not paid",
		"Only a paid order can be refunded, and this one was never charged. Nothing was done."}
	RefundExceeds = Type{"refund-exceeds-refundable", http.StatusConflict, "More than is left to refund",
		"The amount asked is more than what can still be refunded on this order: the charge less the refunds already made or in progress. Nothing was done; the order's `refunded_cents` says how much was given back."}
	RefundFailed = Type{"refund-failed", http.StatusConflict, "Refund failed",
		"The payment provider could not send the refund to the card (for example, the card's account is closed). Nothing was given back, and the amount can still be refunded."}
	OutOfStock = Type{"out-of-stock", http.StatusConflict, "Out of stock",
		"A line of the order asks for more units than the product has left: `detail` names each such product and how many are left, and `errors` points at its line. Nothing was reserved and nothing was ordered, and the key was released: lower the quantities and send the order again, or send the same order again, with the same key, once the product is restocked (`stock` in `GET /api/v1/products`). An order reserves its units when it is placed; a cancelled order's units come back."}
	TooManyPendingOrders = Type{"too-many-pending-orders", http.StatusConflict, "Too many unpaid orders",
		"The shopper already has as many unpaid orders as the shop allows at once (`MAX_PENDING_ORDERS`, 3 by default), each holding its units from sale. Nothing was ordered, and the key was released: pay or cancel one of them, then send the same order again, with the same key."}
	RefundUnconfirmed = Type{"refund-unconfirmed", http.StatusBadGateway, "Refund not confirmed yet",
		"The payment provider did not say whether a refund of this order went through. No other refund of the order is sent until it has said, so nothing is refunded twice. The key was released: retry with the same key to learn the outcome."}
	Forbidden = Type{"forbidden", http.StatusForbidden, "Not allowed",
		"The token is valid, but its user may not do this: refunds are given by the shop's staff, and a shopper asks for one with `POST /api/v1/orders/{id}/refund-requests`. Nothing was done, and the idempotency key was not used: it can still name another request."}
	CrossOrigin = Type{"cross-origin-refused", http.StatusForbidden, "Cross-origin request refused",
		"The browser reported that this form was submitted from another site. The shop only accepts its own forms, so that no other site can place orders or payments in your name. Nothing was done."}
	TooManyRequests = Type{"too-many-requests", http.StatusTooManyRequests, "Too many attempts",
		"Sign-ups and log-ins are limited per client address, and failed log-ins per account, because each costs the server a deliberately slow password hash. Nothing was done: wait the number of seconds in `Retry-After`, then try again."}
	MethodNotAllowed = Type{"method-not-allowed", http.StatusMethodNotAllowed, "Method not allowed",
		"This path does not accept this method."}
	ServiceUnavailable = Type{"service-unavailable", http.StatusServiceUnavailable, "Service unavailable",
		"The server could not reach its database, or lost it during the request. Retry after `Retry-After` seconds with the same key: what was done already (a charge at the provider, say) is done once, and the retry gets its answer."}
	Conflict = Type{"conflict", http.StatusConflict, "Conflict",
		"The current state of the resource does not allow this request."}
	Internal = refuseInternal.documented(
		"Something failed on our side. The key was released and nothing was stored: retry with the same key.")
)

// All lists every type, for the documentation pages.
var All = []Type{
	KeyMissing, KeyInvalid, KeyReused, KeyInProgress, KeyLeaseLost,
	TooLarge, UnsupportedMediaType, MalformedRequest, Validation,
	InvalidParameter, TokenExpired, TokenRevoked,
	Unauthorized, BadCredentials, NotFound, EmailTaken,
	OrderPaid, PaymentInProgress, PaymentDeclined, ProviderUnavailable, PaymentUnconfirmed, WebhookSignature,
	WebhookAPIVersion, OrderCancelled, OutOfStock, TooManyPendingOrders, OrderNotPaid, RefundExceeds, RefundFailed, RefundUnconfirmed, Conflict, Forbidden, CrossOrigin, TooManyRequests, MethodNotAllowed, ServiceUnavailable, Internal,
}
