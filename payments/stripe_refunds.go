package payments

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/stripe/stripe-go/v82"

	"github.com/shop/shop/models"
)

// Refund implements Provider through Stripe's Refunds API: a refund of the
// PaymentIntent the charge was, with the derived key as Stripe's
// Idempotency-Key and in the metadata, as for charges.
func (s *Stripe) Refund(ctx context.Context, req RefundRequest) (RefundAnswer, error) {
	params := &stripe.RefundCreateParams{PaymentIntent: stripe.String(req.ChargeID), Amount: stripe.Int64(req.AmountCents)}
	keyed(params, req.IdempotencyKey, req.OrderID)
	refund, err := s.client.V1Refunds.Create(ctx, params)
	return answered(refund, err, func(r *stripe.Refund) (RefundAnswer, error) { return refundAnswerOf(r), nil }, refundOfError)
}

// refundOfError maps Stripe's errors to a refund, as chargeOfError does to
// a charge, with one difference:
//   - a card error, or Stripe's refusal of this refund itself — the charge
//     is already refunded, the amount is more than is left, the payment is
//     disputed — is a failed refund, with Stripe's message: Stripe executed
//     the request and refused it, gave nothing back, and answers the same
//     under the key every time, so the outcome is final and stored;
//   - anything else is chargeOfError's answer: another invalid request
//     (the shop's request is wrong: no such PaymentIntent, a bad parameter)
//     is a definitive refusal, ErrRefused; 401/403/429 are ErrUnavailable;
//     an idempotency error, 409 and any 5xx leave the refund in doubt.
func refundOfError(e *stripe.Error) (RefundAnswer, error) {
	switch e.Code {
	case stripe.ErrorCodeChargeAlreadyRefunded, stripe.ErrorCodeAmountTooLarge, stripe.ErrorCodeChargeDisputed, stripe.ErrorCodeRefundDisputedPayment:
		if e.Type == stripe.ErrorTypeInvalidRequest && e.HTTPStatusCode == http.StatusBadRequest {
			return RefundAnswer{State: models.Failed, FailureReason: refundRefusal(e)}, nil
		}
	}
	if _, err := chargeOfError(e); err != nil {
		return RefundAnswer{}, err
	}
	return RefundAnswer{State: models.Failed, FailureReason: refundRefusal(e)}, nil // a card error
}

// refundRefusal is Stripe's message for a refused refund, or a plain one.
func refundRefusal(e *stripe.Error) string {
	if e.Msg != "" {
		return e.Msg
	}
	return stripeRefundFailed
}

// FindRefund implements Provider: Stripe has no search for refunds, so the
// PaymentIntent's refunds are listed and matched by the key in their
// metadata.
func (s *Stripe) FindRefund(ctx context.Context, req RefundRequest) (RefundAnswer, bool, error) {
	params := &stripe.RefundListParams{PaymentIntent: stripe.String(req.ChargeID)}
	for refund, err := range s.client.V1Refunds.List(ctx, params) {
		if err != nil {
			return RefundAnswer{}, false, fmt.Errorf("%w: list refunds: %w", ErrInDoubt, err)
		}
		if refund.Metadata[stripeKeyMetadata] == req.IdempotencyKey {
			return refundAnswerOf(refund), true, nil
		}
	}
	return RefundAnswer{}, false, nil
}

// refundAnswerOf reads a Stripe refund's state: succeeded, failed or
// canceled (nothing given back), or pending (requires_action included).
func refundAnswerOf(r *stripe.Refund) RefundAnswer {
	answer := RefundAnswer{ID: r.ID, State: models.Pending}
	switch r.Status {
	case stripe.RefundStatusSucceeded:
		answer.State = models.Succeeded
	case stripe.RefundStatusFailed, stripe.RefundStatusCanceled:
		answer.State, answer.FailureReason = models.Failed, refundFailure(r)
	}
	return answer
}

func refundFailure(r *stripe.Refund) string {
	if r.FailureReason != "" {
		return "The refund could not be sent to the card (" + strings.ReplaceAll(string(r.FailureReason), "_", " ") + ")."
	}
	return stripeRefundFailed
}

// stripeRefundFailed is the reason of a failed refund Stripe gives no
// message for.
const stripeRefundFailed = "The refund could not be sent to the card."
