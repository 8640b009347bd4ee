package tests

import (
	"fmt"
	"net/http"
	"sort"

	"github.com/anishathalye/porcupine"
)

// keyState is what one key has decided, in the one-at-a-time shop.
type keyState struct {
	answer  string // empty until the key's first execution completes: its status and body
	variant int    // the body of that execution
	held    uint8  // bit v: a request with body v whose outcome is unknown may hold the key
}

// slotState is one order's keys — its create key, then its payment keys —
// and which payment key's charge paid it (0: none).
type slotState struct {
	keys   [1 + payKeys]keyState
	paidBy int
}

// contractModel is the idempotency contract, one order (slot) at a time:
//   - the first completed execution of a key defines its answer, and every
//     later answer under that key is the same (status and body);
//   - a key used with a different body gets 422, and only when the key was
//     first used, or may be held, with another body;
//   - an order is charged once at most, whatever the keys: the payment key
//     that paid it answers 201, every other one 409 "already paid";
//   - an operation whose answer never came (unknown) may have run at any
//     moment after its call, or not at all: it may hold its key, and a
//     payment may have paid the order;
//   - a hold (withHolds) may hold its key at any moment after its call;
//   - an order refused 409 out-of-stock stored nothing: its key stays
//     free (whether the refusal was right is stockModel's to say).
var contractModel = (&porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		bySlot := map[int][]porcupine.Operation{}
		for _, op := range history {
			if op.Input.(opInput).restock {
				continue // the stock model's: see stockModel
			}
			s := op.Input.(opInput).slot
			bySlot[s] = append(bySlot[s], op)
		}
		slots := make([]int, 0, len(bySlot))
		for s := range bySlot {
			slots = append(slots, s)
		}
		sort.Ints(slots)
		out := make([][]porcupine.Operation, 0, len(slots))
		for _, s := range slots {
			out = append(out, bySlot[s])
		}
		return out
	},
	Init: func() []any { return []any{slotState{}} },
	Step: func(state, input, output any) []any {
		next := stepContract(state.(slotState), input.(opInput), output.(opOutput))
		out := make([]any, len(next))
		for i, s := range next {
			out[i] = s
		}
		return out
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(opInput), output.(opOutput)
		what := fmt.Sprintf("create order (body %d)", in.variant)
		if in.key > 0 {
			what = fmt.Sprintf("pay with key %d (card %d)", in.key, in.variant)
		}
		if in.hold {
			return what + ": may hold the key"
		}
		switch out.outcome {
		case unknown:
			return what + " → unknown"
		case mismatch:
			return what + " → 422 key reused"
		}
		return fmt.Sprintf("%s → %s %s", what, out.answer, out.about)
	},
	DescribeState: func(state any) string {
		s := state.(slotState)
		return fmt.Sprintf("keys %v, paid by key %d", s.keys, s.paidBy)
	},
	DescribeOperationMetadata: func(info any) string { return fmt.Sprintf("instance %v", info) },
}).ToModel()

// stepContract is the one-at-a-time shop: the states the operation may
// lead to from s, none when its answer is impossible.
func stepContract(s slotState, in opInput, out opOutput) []slotState {
	k := &s.keys[in.key]
	bit := uint8(1) << in.variant
	switch out.outcome {
	case unknown:
		if k.answer != "" {
			return []slotState{s} // a retry of a completed key changes nothing
		}
		held := s
		held.keys[in.key].held |= bit
		next := []slotState{s, held}
		if in.key > 0 && s.paidBy == 0 && !in.hold {
			paid := held
			paid.paidBy = in.key
			next = append(next, paid)
		}
		return next
	case mismatch:
		if (k.answer != "" && k.variant != in.variant) || (k.answer == "" && k.held&^bit != 0) {
			return []slotState{s}
		}
		return nil
	}
	if k.answer != "" {
		if k.variant == in.variant && k.answer == out.answer {
			return []slotState{s}
		}
		return nil
	}
	if in.key == 0 && out.status == http.StatusConflict && out.about == "out-of-stock" {
		return []slotState{s}
	}
	switch {
	case in.key == 0 && out.status == http.StatusCreated:
	case in.key > 0 && out.status == http.StatusCreated && (s.paidBy == 0 || s.paidBy == in.key):
		s.paidBy = in.key
	case in.key > 0 && out.status == http.StatusConflict && out.about == "order-already-paid" && s.paidBy != 0 && s.paidBy != in.key:
	default:
		return nil
	}
	k.answer, k.variant, k.held = out.answer, in.variant, 0
	return []slotState{s}
}
