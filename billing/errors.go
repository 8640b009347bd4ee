package billing

import (
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// The service's refusals that are not the shopper's doing: the provider did
// not confirm, or refused the request. Each is answered 502 and releases the
// operation's key, so that a retry may run.
var (
	// ErrUnconfirmed: the operation's own charge is in doubt.
	ErrUnconfirmed = models.Declare(&models.Error{Type: problem.PaymentUnconfirmed, Shopper: paymentConfirming,
		Message: "The payment provider did not confirm the charge. Retry with the same key: the provider recognises the retry, so it never charges twice."})
	// ErrEarlierUnconfirmed: an earlier payment of the order is in doubt,
	// and the provider could not say what became of it.
	ErrEarlierUnconfirmed = models.Declare(&models.Error{Type: problem.PaymentUnconfirmed, Shopper: paymentConfirming,
		Message: models.ErrPaymentInDoubt.Message})
	// ErrProviderUnavailable: the provider refused the request before
	// charging anything.
	ErrProviderUnavailable = models.Declare(&models.Error{Type: problem.ProviderUnavailable,
		Message: "The payment provider is unavailable; nothing was charged. Retry with the same key.",
		Shopper: models.Words{Heading: "The payment did not go through", Retry: "Try again",
			Text: "The payment service is not answering right now. Nothing was charged, try again in a moment: you will never be charged twice."}})
)

var paymentConfirming = models.Words{Heading: "Your payment is being confirmed", Retry: "Try again",
	Text: "The card provider has not yet told us whether your payment went through. You will not be charged twice: look at the order again in a moment, or try again to ask once more."}

// Errors of the refund workflow that are not the shopper's doing.
var (
	// ErrRefundUnconfirmed: the operation's own refund is in doubt.
	ErrRefundUnconfirmed = models.Declare(&models.Error{Type: problem.RefundUnconfirmed, Shopper: refundConfirming,
		Message: "The payment provider did not confirm the refund. Retry with the same key: the provider recognises the retry, so it never refunds twice."})
	// ErrEarlierRefundUnconfirmed: an earlier refund of the order is in
	// doubt, and the provider could not say what became of it.
	ErrEarlierRefundUnconfirmed = models.Declare(&models.Error{Type: problem.RefundUnconfirmed, Shopper: refundConfirming,
		Message: "An earlier refund of this order is being confirmed with the payment provider; nothing more was refunded. Try again in a moment."})
	// ErrRefundUnavailable: the provider turned the refund away for now
	// (unavailable, rate limited), before giving anything back.
	ErrRefundUnavailable = models.Declare(&models.Error{Type: problem.ProviderUnavailable,
		Message: "The payment provider is unavailable; nothing was refunded. Retry with the same key.",
		Shopper: models.Words{Heading: "The refund did not go through", Retry: "Try again",
			Text: "The card provider is not answering right now. Nothing was refunded; try again in a moment: nothing is ever refunded twice."}})
)

var refundConfirming = models.Words{Heading: "Your refund is being confirmed", Retry: "Try again",
	Text: "The card provider has not yet told us whether your refund went through. Nothing is refunded twice: look at the order again in a moment, or try again to ask once more."}
