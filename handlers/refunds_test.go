package handlers

import "testing"

// The API and the console read a refund's reason by the same rule: trimmed,
// then at most 200 characters. The API once kept the spaces the console
// trimmed.
func TestRefundReasonIsTrimmedForAPIAndConsole(t *testing.T) {
	api, err := refundInput(nil, "  damaged in transit \n")
	if err != nil || api.Reason != "damaged in transit" {
		t.Fatalf("API refund reason: %q, %v", api.Reason, err)
	}
	console, wrong := consoleRefund("12.50", "  damaged in transit \n")
	if wrong != "" || console.Reason != api.Reason || console.AmountCents == nil || *console.AmountCents != 1250 {
		t.Fatalf("console refund: %+v, %q", console, wrong)
	}
	if _, err := refundInput(nil, "   x   "); err != nil {
		t.Fatalf("a short reason padded with spaces refused: %v", err)
	}
	zero := int64(0)
	if _, err := refundInput(&zero, ""); err == nil {
		t.Fatal("a refund of 0 cents accepted")
	}
}
