package models_test

import (
	"testing"

	_ "github.com/shop/shop/handlers" // declares the HTTP layer's words of a type
	"github.com/shop/shop/models"
	"github.com/shop/shop/problem"
)

// What a problem type's page (/problems/{slug}), and a problem of the type
// with no words of its own, tell and decide never depends on which named
// error happens to be declared first: the finality is every named error's
// of the type, and a type whose errors are declared in several packages
// (conflict, provider-unavailable) has words of its own.
func TestAProblemTypesWordsDoNotDependOnDeclarationOrder(t *testing.T) {
	byType := map[string][]*models.Error{}
	for _, e := range models.DeclaredErrors() {
		if e.Message != "" {
			byType[e.Type.URI()] = append(byType[e.Type.URI()], e)
		}
	}
	for uri, errs := range byType {
		for _, e := range errs {
			if d := models.Declared(uri); d == nil || d.Final != e.Final {
				t.Errorf("%s: a problem of the type without words is final=%v, but %q is final=%v", uri, d != nil && d.Final, e.Message, e.Final)
			}
		}
	}
	for _, typ := range []problem.Type{problem.Conflict, problem.ProviderUnavailable} {
		if len(byType[typ.URI()]) < 2 {
			t.Errorf("%s: %d named errors, want several (else this check is moot)", typ.Slug, len(byType[typ.URI()]))
		}
		if d := models.Declared(typ.URI()); d == nil || d.Message != "" || d.Shopper.Heading == "" {
			t.Errorf("%s: its page shows %+v, want words of its own, not one of its errors'", typ.Slug, d)
		}
	}
}
