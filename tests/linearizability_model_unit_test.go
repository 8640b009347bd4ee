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
