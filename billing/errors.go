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
