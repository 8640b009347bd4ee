package models_test

import (
	"testing"

	_ "github.com/shop/shop/handlers" // declares, through its imports, every named error
	"github.com/shop/shop/handlers/views"
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
		byType[e.Type.URI()] = append(byType[e.Type.URI()], e)
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
		if words := views.ShopperWords[typ.Slug]; words.Heading == "" {
			t.Errorf("%s: its page shows %+v, want words of its own, not one of its errors'", typ.Slug, words)
		}
	}
}

// Every named error has words in the HTTP layer's table, but the token's,
// which only the API gets; its copies (With, ForNow) keep them; and every
// entry of the table tells a named error or a problem type: a new error
// without words, or words left of an error gone, fail here.
func TestEveryNamedErrorHasWords(t *testing.T) {
	apiOnly := map[*models.Error]bool{models.ErrTokenExpired: true, models.ErrTokenRevoked: true}
	slugs, told := map[string]bool{}, map[string]bool{}
	for _, typ := range problem.All {
		slugs[typ.Slug], told[typ.Slug] = true, true
	}
	for _, e := range models.DeclaredErrors() {
		words := views.WordsOf(e)
		if !apiOnly[e] && (words.Heading == "" || words.Text == "") {
			t.Errorf("%s %q (%q) has no words in views.ShopperWords", e.Type.Slug, e.Name, e.Message)
		}
		if views.WordsOf(e.With("another message")) != words || views.WordsOf(e.ForNow()) != words {
			t.Errorf("%s %q: a copy of it is told otherwise", e.Type.Slug, e.Name)
		}
		if slugs[e.Name] && e.Name != e.Type.Slug {
			t.Errorf("%s: its name %q is another problem type's", e.Type.Slug, e.Name)
		}
		told[e.Name] = true
	}
	for key := range views.ShopperWords {
		if !told[key] {
			t.Errorf("views.ShopperWords[%q] tells no named error and no problem type", key)
		}
	}
}
