package handlers

import (
	"go/ast"
	"go/types"
	"testing"

	"golang.org/x/tools/go/packages"
)

// moneyFunctions are the functions of billing's ledger and of the order's
// hold (orders) that write or read a payment attempt, a refund in doubt or
// an order's hold: the payments service's alone.
var moneyFunctions = map[string]bool{
	"BeginPayment": true, "Settle": true, "BeginRefund": true, "SettleRefund": true,
	"HoldForResolution": true, "Stale": true, "ByKey": true,
	"MarkSent": true, "ExtendHold": true, "ReleaseHold": true, "PaymentOf": true, "RefundOf": true,
	"AttemptsInDoubt": true, "NewHolder": true, "TakeHold": true, "TakeHoldFrom": true,
}

// TestHandlersLeaveTheMoneyToTheService holds the layering rule: handlers
// decode, call the payments service (billing) and render. They never call a
// payment provider, nor the ledger's attempt functions, nor the order's hold. It reads
// the package's production code as the compiler types it.
func TestHandlersLeaveTheMoneyToTheService(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax}
	pkgs, err := packages.Load(cfg, "github.com/shop/shop/handlers")
	if err != nil || len(pkgs) != 1 || len(pkgs[0].Errors) > 0 {
		t.Fatalf("load handlers: %v %v", err, pkgs)
	}
	pkg := pkgs[0]
	calls := 0
	for _, file := range pkg.Syntax {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fun := call.Fun
			if index, ok := fun.(*ast.IndexExpr); ok { // a generic function, instantiated: billing.Stale[R]
				fun = index.X
			}
			sel, ok := fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			fn, ok := pkg.TypesInfo.Uses[sel.Sel].(*types.Func)
			if !ok || fn.Pkg() == nil {
				return true
			}
			calls++
			if why := forbidden(fn); why != "" {
				t.Errorf("%s: handlers call %s.%s, %s", pkg.Fset.Position(call.Pos()), fn.Pkg().Name(), fn.Name(), why)
			}
			return true
		})
	}
	if calls < 100 {
		t.Fatalf("only %d calls seen: the check is not reading the handlers", calls)
	}
}

// forbidden says why handlers may not call fn, or "" when they may.
func forbidden(fn *types.Func) string {
	recv := fn.Type().(*types.Signature).Recv()
	switch path := fn.Pkg().Path(); {
	case path == "github.com/shop/shop/payments" && recv != nil:
		return "a payment provider: only the payments service calls it"
	case (path == "github.com/shop/shop/billing" || path == "github.com/shop/shop/orders") &&
		moneyFunctions[fn.Name()] && (recv == nil || types.TypeString(recv.Type(), nil) == "github.com/shop/shop/billing.Ledger"):
		return "an attempt or hold function: only the payments service calls it"
	}
	return ""
}

// TestLayeringCheckCatchesAProviderCall shows the check is not blind: a
// call of each kind it forbids is reported.
func TestLayeringCheckCatchesAProviderCall(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes}
	pkgs, err := packages.Load(cfg, "github.com/shop/shop/payments", "github.com/shop/shop/billing", "github.com/shop/shop/orders")
	if err != nil || len(pkgs) != 3 {
		t.Fatalf("load: %v", err)
	}
	for _, c := range []struct{ pkg, typ, method string }{
		{"payments", "Simulated", "Charge"}, {"payments", "Stripe", "Find"},
		{"billing", "Ledger", "BeginPayment"}, {"billing", "", "Stale"}, {"orders", "", "ReleaseHold"},
	} {
		for _, p := range pkgs {
			if p.Name != c.pkg {
				continue
			}
			obj := p.Types.Scope().Lookup(c.method)
			if c.typ != "" {
				obj, _, _ = types.LookupFieldOrMethod(types.NewPointer(p.Types.Scope().Lookup(c.typ).Type()), true, p.Types, c.method)
			}
			fn, ok := obj.(*types.Func)
			if !ok || forbidden(fn) == "" {
				t.Errorf("a call of %s.%s.%s would not be reported", c.pkg, c.typ, c.method)
			}
		}
	}
}

// TestTheServiceNeverCallsBackIntoHandlers: the operation a handler hands
// the payments service is the middleware's own (middleware.Current), so
// that the service, once called, calls nothing defined in handlers/ — no
// closure of a handler's stands in a billing.Operation.
func TestTheServiceNeverCallsBackIntoHandlers(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, "github.com/shop/shop/handlers")
	if err != nil || len(pkgs) != 1 || len(pkgs[0].Errors) > 0 {
		t.Fatalf("load handlers: %v %v", err, pkgs)
	}
	built := 0
	for _, file := range pkgs[0].Syntax {
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok || types.TypeString(pkgs[0].TypesInfo.TypeOf(lit), nil) != "github.com/shop/shop/billing.Operation" {
				return true
			}
			built++
			ast.Inspect(lit, func(n ast.Node) bool {
				if _, ok := n.(*ast.FuncLit); ok {
					t.Errorf("%s: a billing.Operation holds a function literal of handlers/", pkgs[0].Fset.Position(n.Pos()))
				}
				return true
			})
			return true
		})
	}
	if built == 0 {
		t.Fatal("no billing.Operation is built in handlers/: the check is not reading them")
	}
}
