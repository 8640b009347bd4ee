package handlers

import "context"

// Faults are fault-injection points for tests, to reproduce a crash at the
// moments that matter. They exist only as a field of Deps: main never sets
// it and no configuration or environment variable reaches it.
type Faults struct {
	// AfterCharge runs once the provider has charged and before the payment
	// is written, the most expensive moment to crash. A hook that blocks
	// reproduces a process that froze or died there: the key stays in
	// progress under its lease, the charge exists, nothing is committed.
	AfterCharge func(ctx context.Context)
}

func (f *Faults) afterCharge(ctx context.Context) {
	if f != nil && f.AfterCharge != nil {
		f.AfterCharge(ctx)
	}
}
