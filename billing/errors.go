package billing

import (
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// The service's refusals that are not the shopper's doing: the provider did
// not confirm the operation's own request (unconfirmed) or an earlier one of
// the order (earlier), or refused the request before doing anything
// (unavailable). Each is answered 502 and releases the operation's key, so
// that a retry may run.
var (
	ErrUnconfirmed, ErrEarlierUnconfirmed, ErrProviderUnavailable = providerErrors(problem.PaymentUnconfirmed,
		"payment", "charge", "charged", models.ErrPaymentInDoubt.Message)
	ErrRefundUnconfirmed, ErrEarlierRefundUnconfirmed, ErrRefundUnavailable = providerErrors(problem.RefundUnconfirmed,
		"refund", "refund", "refunded", "An earlier refund of this order is being confirmed with the payment provider; nothing more was refunded. Try again in a moment.")
)

// providerErrors declares a use's three refusals, in its words: what the
// shopper calls it (payment), what the provider does (charge), and what was
// not done (charged).
func providerErrors(unconfirmed problem.Type, what, does, done, earlier string) (own, earlierOne, unavailable *models.Error) {
	confirming := models.Words{Heading: "Your " + what + " is being confirmed", Retry: "Try again",
		Text: "The card provider has not yet told us whether your " + what + " went through. Nothing is " + done + " twice: look at the order again in a moment, or try again to ask once more."}
	own = models.Declare(&models.Error{Type: unconfirmed, Shopper: confirming,
		Message: "The payment provider did not confirm the " + does + ". Retry with the same key: the provider recognises the retry, so it never " + does + "s twice."})
	earlierOne = models.Declare(&models.Error{Type: unconfirmed, Shopper: confirming, Message: earlier})
	unavailable = models.Declare(&models.Error{Type: problem.ProviderUnavailable,
		Message: "The payment provider is unavailable; nothing was " + done + ". Retry with the same key.",
		Shopper: models.Words{Heading: "The " + what + " did not go through", Retry: "Try again",
			Text: "The card provider is not answering right now. Nothing was " + done + ", try again in a moment: nothing is ever " + done + " twice."}})
	return own, earlierOne, unavailable
}
