package tests

import (
	"fmt"
	"net/http"

	"github.com/anishathalye/porcupine"
)

// stockState is what the one-at-a-time shop knows of the scarce product:
// the units left, and what each slot's order took (byte s of took: the
// units slot s's create key reserved; 0: none yet).
type stockState struct {
	left int
	took string
}

func (s stockState) taken(slot int) byte {
	if slot < len(s.took) {
		return s.took[slot]
	}
	return 0
}

func (s stockState) reserve(slot, units int) stockState {
	b := []byte(s.took)
	for len(b) <= slot {
		b = append(b, 0)
	}
	b[slot] = byte(units)
	return stockState{left: s.left - units, took: string(b)}
}

// stockModel is the reservation rule, on the one product every slot's
// order buys (1 unit, or 2 with the other body):
//   - an order's first execution reserves its units, which must be left:
//     a 201 when fewer are left is an oversell;
//   - it is refused 409 out-of-stock only when fewer are left than it
//     asks, and then reserves nothing (its key stays free);
//   - a replay of a placed order (a 201 on a key that reserved already)
//     reserves nothing again;
//   - an order whose answer never came may have reserved, once, at any
//     moment after its call; a 422 (another body under the key) ran
//     nothing;
//   - a restock (the harness's, between rounds) sets the units left.
//
// Holds are the contract model's business: they reserve nothing.
var stockModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		var ops []porcupine.Operation
		for _, op := range history {
			if in := op.Input.(opInput); in.restock || (in.key == 0 && !in.hold) {
				ops = append(ops, op)
			}
		}
		return [][]porcupine.Operation{ops}
	},
	Init: func() []any { return []any{stockState{left: 0}} },
	Step: func(state, input, output any) []any {
		next := stepStock(state.(stockState), input.(opInput), output.(opOutput))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(opInput), output.(opOutput)
		if in.restock {
			return fmt.Sprintf("restock to %d", in.units)
		}
		what := fmt.Sprintf("order %d: %d unit(s)", in.slot, 1+in.variant)
		switch out.outcome {
		case unknown:
			return what + " → unknown"
		case mismatch:
			return what + " → 422 key reused"
		}
		return fmt.Sprintf("%s → %d %s", what, out.status, out.about)
	},
	DescribeState: func(state any) string {
		s := state.(stockState)
		return fmt.Sprintf("%d left, taken by slot %v", s.left, []byte(s.took))
	},
	DescribeOperationMetadata: func(info any) string { return fmt.Sprintf("instance %v", info) },
}).ToModel()

// stepStock is the one-at-a-time shop's stock: the states the operation
// may lead to from s, none when its answer is impossible.
func stepStock(s stockState, in opInput, out opOutput) []stockState {
	if in.restock {
		s.left = in.units
		return []stockState{s}
	}
	units, took := 1+in.variant, s.taken(in.slot) > 0
	switch {
	case out.outcome == mismatch:
		return []stockState{s}
	case out.outcome == unknown:
		if took || s.left < units {
			return []stockState{s}
		}
		return []stockState{s, s.reserve(in.slot, units)}
	case out.status == http.StatusCreated && took:
		return []stockState{s} // a replay reserves nothing
	case out.status == http.StatusCreated && s.left >= units:
		return []stockState{s.reserve(in.slot, units)}
	case out.status == http.StatusConflict && out.about == "out-of-stock" && !took && s.left < units:
		return []stockState{s}
	}
	return nil // an oversell, a refusal while it fitted, or an answer no order gets
}
