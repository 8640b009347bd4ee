package billing

import "github.com/shop/shop/models"

// The service's refusals that are not the shopper's doing: the provider did
// not confirm, or refused the request. Each is answered 502 and releases the
// operation's key, so that a retry may run.
var (
	// ErrUnconfirmed: the operation's own charge is in doubt.
	ErrUnconfirmed = &models.Error{Code: models.EUNAVAILABLE, Message: "The payment provider did not confirm the charge. Retry with the same key: the provider recognises the retry, so it never charges twice."}
	// ErrEarlierUnconfirmed: an earlier payment of the order is in doubt,
	// and the provider could not say what became of it.
	ErrEarlierUnconfirmed = &models.Error{Code: models.EUNAVAILABLE, Message: models.ErrPaymentInDoubt.Message}
	// ErrProviderUnavailable: the provider refused the request before
	// charging anything.
	ErrProviderUnavailable = &models.Error{Code: models.EUNAVAILABLE, Message: "The payment provider is unavailable; nothing was charged. Retry with the same key."}
)

// Errors of the refund workflow that are not the shopper's doing.
var (
	// ErrRefundUnconfirmed: the operation's own refund is in doubt.
	ErrRefundUnconfirmed = &models.Error{Code: models.EUNAVAILABLE, Message: "The payment provider did not confirm the refund. Retry with the same key: the provider recognises the retry, so it never refunds twice."}
	// ErrEarlierRefundUnconfirmed: an earlier refund of the order is in
	// doubt, and the provider could not say what became of it.
	ErrEarlierRefundUnconfirmed = &models.Error{Code: models.EUNAVAILABLE, Message: "An earlier refund of this order is being confirmed with the payment provider; nothing more was refunded. Try again in a moment."}
	// ErrRefundUnavailable: the provider turned the refund away for now
	// (unavailable, rate limited), before giving anything back.
	ErrRefundUnavailable = &models.Error{Code: models.EUNAVAILABLE, Message: "The payment provider is unavailable; nothing was refunded. Retry with the same key."}
)
