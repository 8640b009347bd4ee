package payments

import "testing"

// Every redirect the shop takes from a request goes through LocalPath: a
// plain path on this site is kept, with its query; anything that could
// leave the site, or that a browser might read otherwise, becomes "/".
func TestLocalPathKeepsOnlyPathsOnThisSite(t *testing.T) {
	for target, want := range map[string]string{
		"/orders/42?paid=1":             "/orders/42?paid=1",
		"/":                             "/",
		"":                              "/",
		"orders/42":                     "/",
		"//evil.example/x":              "/",
		"https://evil.example/x":        "/",
		"https://shop.example/orders/1": "/", // absolute, even to this site: callers pass the path
		"/\\evil.example":               "/",
		"/\t/evil.example":              "/",
		"/%zz":                          "/",
		"javascript:alert(1)":           "/",
	} {
		if got := LocalPath(target); got != want {
			t.Errorf("LocalPath(%q) = %q, want %q", target, got, want)
		}
	}
}
