package views

import (
	"cmp"

	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// Words tell an error to a shopper, on the browser's pages and the Activity page.
type Words struct {
	Heading string // the error page's heading
	Text    string // what happened, what was not done, what to do next
	Retry   string // labels the button that sends the form again; "" for none (always so for a final answer)
	Outcome string // ends the Activity line of a form that got this answer
}

// WordsOf is a named error's words: by its Name, else by its problem type's.
func WordsOf(e *models.Error) Words { return ShopperWords[cmp.Or(e.Name, e.Type.Slug)] }

// paidOrCancelled: the Activity page cannot tell these two apart by the status.
const paidOrCancelled = "the order had already been paid or was cancelled, so nothing was charged"

var (
	stillWorking = Words{Heading: "Still working on it", Retry: "Check again", Text: "Your earlier submission of this form is still being processed. Nothing was done twice. Wait a moment, then check again: you will see how it ended."}
	unreadable   = Words{Heading: "The form could not be read", Text: "The form arrived damaged or incomplete, so nothing was done. Open the page again and send it again."}
)

// ShopperWords tell the errors to a shopper, by a named error's Name, else
// by the slug of its problem type: the type's words are those its page
// shows, and a problem of the type with no named error's words gets.
var ShopperWords = map[string]Words{
	problem.OrderPaid.Slug:            {Heading: "Already paid", Text: "An earlier payment of this order went through (from another tab or window, or one that was being confirmed), so nothing was charged to the card you chose here.", Outcome: paidOrCancelled},
	"paid-not-cancellable":            {Heading: "Already paid", Text: "This order is paid, so it cannot be cancelled. Refunds are given by the shop's staff: contact us.", Outcome: "the order had already been paid, so it was not cancelled"},
	problem.OrderCancelled.Slug:       {Heading: "This order was cancelled", Text: "This order was cancelled, so it cannot be paid, and nothing was charged. You can place a new order from the catalog.", Outcome: paidOrCancelled},
	problem.PaymentDeclined.Slug:      {Heading: "Your card was declined", Text: "Nothing was charged: choose another card and pay again.", Outcome: "the card was declined, so nothing was charged"},
	problem.RefundExceeds.Slug:        {Heading: "More than is left to refund", Text: "That is more than can still be refunded on this order; nothing was refunded.", Outcome: "it was more than could still be refunded, so nothing was refunded"},
	problem.RefundFailed.Slug:         {Heading: "The refund could not be sent to your card", Text: "The card provider refused it (the card's account may be closed), so nothing was given back. Contact us to be paid back another way.", Outcome: "the card provider refused it, so nothing was given back"},
	problem.OrderNotPaid.Slug:         {Heading: "Not paid", Text: "This order is not paid, so there is nothing to refund."},
	problem.PaymentInProgress.Slug:    {Heading: "Another payment or refund is under way", Text: "Another payment or refund of this order is being processed right now, so nothing was done. Wait a moment, then look at the order again."},
	"payment-in-doubt":                {Heading: "Your last payment is being confirmed", Text: "The card provider has not yet told us whether the last payment of this order went through, so nothing more was done. Look at the order again in a moment."},
	"payment-awaiting":                {Heading: "Authenticate to pay", Text: "The last payment of this order waits for you to authenticate it with your card provider, so nothing more was done. Open the order to authenticate."},
	"refund-in-doubt":                 {Heading: "Your last refund is being confirmed", Text: "The card provider has not yet told us whether the last refund of this order went through, so nothing more was refunded. Look at the order again in a moment."},
	problem.OutOfStock.Slug:           {Heading: "Not enough in stock", Text: "Someone bought the last units first, so there is not enough left for your order, and nothing was ordered. Lower the quantities marked, or remove them, and place the order again."},
	problem.TooManyPendingOrders.Slug: {Heading: "Too many unpaid orders", Text: "You already have as many unpaid orders as we keep at once, and nothing was ordered. Pay or cancel one of them, then place this order again."},
	problem.EmailTaken.Slug:           {Heading: "Email already registered", Text: "An account with this email already exists. Log in instead."},
	problem.BadCredentials.Slug:       {Heading: "Wrong email or password", Text: "Wrong email or password."},
	problem.NotFound.Slug:             {Heading: "Page not found", Text: "There is no such page, or it belongs to another account."},
	problem.Forbidden.Slug:            {Heading: "Not allowed", Text: "Only the shop's staff may do this; nothing was done."},
	"order-filter":                    {Heading: "Nothing to find", Text: "Search by an order number (such as 1042) or a shopper's email, and pick a status from the list."},

	problem.PaymentUnconfirmed.Slug: {Heading: "Your payment is being confirmed", Retry: "Try again", Text: "The card provider has not yet told us whether your payment went through. You will not be charged twice: look at the order again in a moment, or try again to ask once more."},
	"payment-unavailable":           {Heading: "The payment did not go through", Retry: "Try again", Text: "The payment service is not answering right now. Nothing was charged, try again in a moment: you will never be charged twice."},
	problem.RefundUnconfirmed.Slug:  {Heading: "Your refund is being confirmed", Retry: "Try again", Text: "The card provider has not yet told us whether your refund went through. Nothing is refunded twice: look at the order again in a moment, or try again to ask once more."},
	"refund-unavailable":            {Heading: "The refund did not go through", Retry: "Try again", Text: "The card provider is not answering right now. Nothing was refunded; try again in a moment: nothing is ever refunded twice."},
	"request-open":                  {Heading: "Already requested", Text: "You have already asked for a refund of this order; the shop's staff will answer it."},
	"request-answered":              {Heading: "Already answered", Text: "This refund request was already answered; nothing was changed."},
	"not-in-doubt":                  {Heading: "Nothing to ask", Text: "This request is no longer in doubt, or is being resolved right now; nothing was asked of the provider."},

	// The HTTP layer's own, for the middleware's and the handlers' refusals.
	problem.KeyReused.Slug:     {Heading: "This form was already sent", Text: "This form was already sent with different contents. So that nothing is done that you did not mean, nothing was done this time. Your first submission stands: check your orders, or start again from a fresh form."},
	problem.KeyInProgress.Slug: stillWorking, problem.KeyLeaseLost.Slug: stillWorking,
	problem.Unauthorized.Slug:    {Heading: "Please log in", Text: "You need to be logged in for this. Your session may have ended: log in, then send the form again."},
	problem.TooManyRequests.Slug: {Heading: "Too many attempts", Text: "There were too many attempts to sign up or log in. Wait a little, then try again."},
	problem.CrossOrigin.Slug:     {Heading: "Refused: sent from another site", Text: "This form was sent from another website, so the shop refused it. Nothing was done."},
	problem.TooLarge.Slug:        unreadable, problem.MalformedRequest.Slug: unreadable, problem.KeyMissing.Slug: unreadable, problem.KeyInvalid.Slug: unreadable,
	problem.ServiceUnavailable.Slug:  {Heading: "The shop is busy", Retry: "Try again", Text: "The shop could not finish this just now. Please try again in a moment: sending the form again never does anything twice."},
	problem.Conflict.Slug:            {Heading: "Not possible now", Text: "Where this order or request stands does not allow it, so nothing was done. Look at the order to see where it stands."},
	problem.ProviderUnavailable.Slug: {Heading: "The card provider is not answering", Retry: "Try again", Text: "The card provider is not answering right now, so nothing was charged or refunded. Try again in a moment: nothing is ever done twice."},
	problem.Internal.Slug:            {Heading: "Something went wrong", Retry: "Try again", Text: "Something went wrong on our side. Please try again: sending the form again never does anything twice."},
}
