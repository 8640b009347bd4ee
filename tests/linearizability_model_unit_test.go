package tests

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// The model accepts the histories the contract allows and refuses the
// ones it forbids, on hand-written histories of one order.
func TestContractModelRefusesWhatTheContractForbids(t *testing.T) {
	created := opOutput{outcome: answered, status: 201, answer: "201:order-1", about: "order-1"}
	paid := func(payment string) opOutput {
		return opOutput{outcome: answered, status: 201, answer: "201:" + payment, about: payment}
	}
	alreadyPaid := opOutput{outcome: answered, status: 409, answer: "409:paid", about: "order-already-paid"}
	reused := opOutput{outcome: mismatch, status: 422}
	gone := opOutput{outcome: unknown}
	soldOut := opOutput{outcome: answered, status: 409, answer: "409:short", about: "out-of-stock"}
	// op is one operation on slot 0, from call to ret (ret < 0: unknown).
	type op struct {
		key, variant int
		out          opOutput
		call, ret    int64
	}
	cases := []struct {
		name  string
		ops   []op
		legal bool
	}{
		{"a key replays its first answer", []op{{0, 0, created, 0, 1}, {0, 0, created, 2, 3}}, true},
		{"a key answers two different orders", []op{{0, 0, created, 0, 1}, {0, 0, opOutput{outcome: answered, status: 201, answer: "201:order-2"}, 2, 3}}, false},
		{"another body after the first is refused", []op{{0, 0, created, 0, 1}, {0, 1, reused, 2, 3}}, true},
		{"the same body refused as another", []op{{0, 0, created, 0, 1}, {0, 0, reused, 2, 3}}, false},
		{"another body refused before any, with nobody holding the key", []op{{0, 1, reused, 0, 1}, {0, 0, created, 2, 3}}, false},
		{"another body refused while an unknown request may hold the key", []op{{0, 0, gone, 0, -1}, {0, 1, reused, 1, 2}}, true},
		{"one payment key pays, another is told it is paid", []op{{1, 0, paid("pay-1"), 0, 1}, {2, 0, alreadyPaid, 2, 3}}, true},
		{"two payment keys both pay", []op{{1, 0, paid("pay-1"), 0, 1}, {2, 0, paid("pay-2"), 2, 3}}, false},
		{"already paid before anyone paid", []op{{2, 0, alreadyPaid, 0, 1}, {1, 0, paid("pay-1"), 2, 3}}, false},
		{"already paid, by an unknown payment", []op{{1, 0, gone, 0, -1}, {2, 0, alreadyPaid, 1, 2}}, true},
		{"the paying key told it is paid already", []op{{1, 0, gone, 0, -1}, {1, 0, alreadyPaid, 1, 2}}, false},
		{"overlapping: the 422 may follow the 201 that overlaps it", []op{{0, 0, created, 0, 10}, {0, 1, reused, 1, 2}}, true},
		{"another body refused while a request, itself refused in the end, held the key",
			[]op{{1, 1, reused, 0, 20}, {1, 0, reused, 1, 2}, {1, 0, alreadyPaid, 3, 4}, {2, 0, paid("pay-2"), 0, 1}}, true},
		{"a hold pays nothing", []op{{1, 1, reused, 0, 20}, {1, 0, reused, 1, 2}, {2, 0, alreadyPaid, 3, 4}}, false},
		{"an order refused out-of-stock leaves its key free", []op{{0, 0, soldOut, 0, 1}, {0, 0, created, 2, 3}}, true},
		{"a placed order's key refused out-of-stock", []op{{0, 0, created, 0, 1}, {0, 0, soldOut, 2, 3}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var history []porcupine.Operation
			for i, o := range c.ops {
				ret := o.ret
				if ret < 0 {
					ret = math.MaxInt64
				}
				history = append(history, porcupine.Operation{ClientId: i, Input: opInput{key: o.key, variant: o.variant}, Call: o.call, Output: o.out, Return: ret})
			}
			if got := porcupine.CheckOperations(contractModel, withHolds(history)); got != c.legal {
				t.Fatalf("linearizable: %v, want %v", got, c.legal)
			}
		})
	}
}

// The stock model accepts the histories the reservation rule allows and
// refuses an oversell, a replay that reserves again, and a refusal while
// the units were there, on hand-written histories of one product.
func TestStockModelRefusesOversellAndDoubleReservation(t *testing.T) {
	placed := opOutput{outcome: answered, status: 201, answer: "201:order", about: "order"}
	soldOut := opOutput{outcome: answered, status: 409, answer: "409:short", about: "out-of-stock"}
	reused := opOutput{outcome: mismatch, status: 422}
	gone := opOutput{outcome: unknown}
	// op is one order on a slot, of 1+variant units, from call to ret
	// (ret < 0: unknown); restock >= 0 makes it the harness's restock.
	type op struct {
		slot, variant int
		out           opOutput
		call, ret     int64
		restock       int
	}
	to := func(units int, call, ret int64) op { return op{restock: units, call: call, ret: ret} }
	order := func(slot, variant int, out opOutput, call, ret int64) op {
		return op{slot: slot, variant: variant, out: out, call: call, ret: ret, restock: -1}
	}
	cases := []struct {
		name  string
		ops   []op
		legal bool
	}{
		{"two units, three orders: two placed, one refused", []op{to(2, 0, 1), order(0, 0, placed, 2, 5), order(1, 0, placed, 2, 5), order(2, 0, soldOut, 2, 5)}, true},
		{"the last unit sold twice", []op{to(1, 0, 1), order(0, 0, placed, 2, 3), order(1, 0, placed, 4, 5)}, false},
		{"two units asked, one left, placed", []op{to(1, 0, 1), order(0, 1, placed, 2, 3)}, false},
		{"two units asked, one left, refused", []op{to(1, 0, 1), order(0, 1, soldOut, 2, 3), order(1, 0, placed, 4, 5)}, true},
		{"a replay reserves nothing", []op{to(2, 0, 1), order(0, 0, placed, 2, 3), order(0, 0, placed, 4, 5), order(1, 0, placed, 6, 7)}, true},
		{"a replay that reserved again", []op{to(2, 0, 1), order(0, 0, placed, 2, 3), order(0, 0, placed, 4, 5), order(1, 0, soldOut, 6, 7)}, false},
		{"refused while the unit was there", []op{to(1, 0, 1), order(0, 0, soldOut, 2, 3)}, false},
		{"an unknown order may have taken the last unit", []op{to(1, 0, 1), order(0, 0, gone, 2, -1), order(1, 0, soldOut, 3, 4)}, true},
		{"an unknown order may have taken nothing", []op{to(1, 0, 1), order(0, 0, gone, 2, -1), order(1, 0, placed, 3, 4)}, true},
		{"an unknown order retried reserves once", []op{to(2, 0, 1), order(0, 0, gone, 2, -1), order(0, 0, gone, 2, -1), order(1, 0, soldOut, 3, 4)}, false},
		{"a 422 reserves nothing", []op{to(1, 0, 1), order(0, 0, placed, 2, 3), order(0, 1, reused, 4, 5), order(1, 0, soldOut, 6, 7), to(1, 8, 9), order(2, 0, placed, 10, 11)}, true},
		{"a restock gives the units back to sell", []op{to(1, 0, 1), order(0, 0, placed, 2, 3), to(1, 4, 5), order(1, 0, placed, 6, 7)}, true},
		{"overlapping: the refusal may come after the order that took the unit", []op{to(1, 0, 1), order(0, 0, placed, 2, 10), order(1, 0, soldOut, 3, 4)}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var history []porcupine.Operation
			for i, o := range c.ops {
				ret := o.ret
				if ret < 0 {
					ret = math.MaxInt64
				}
				in, out := opInput{slot: o.slot, variant: o.variant}, o.out
				if o.restock >= 0 {
					in, out = opInput{slot: -1, restock: true, units: o.restock}, opOutput{outcome: answered}
				}
				history = append(history, porcupine.Operation{ClientId: i, Input: in, Call: o.call, Output: out, Return: ret})
			}
			if got := porcupine.CheckOperations(stockModel, history); got != c.legal {
				t.Fatalf("linearizable: %v, want %v", got, c.legal)
			}
		})
	}
}
