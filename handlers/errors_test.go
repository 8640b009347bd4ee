package handlers

import (
	"net/http"
	"testing"

	"github.com/shop/shop/models"
)

// Each code of a domain error has its status; a code nobody mapped is the
// server's fault, 500, never a client's.
func TestProblemOfCodes(t *testing.T) {
	for code, want := range map[models.Code]int{
		models.EINVALID:      http.StatusUnprocessableEntity,
		models.ENOTFOUND:     http.StatusNotFound,
		models.ECONFLICT:     http.StatusConflict,
		models.EUNAUTHORIZED: http.StatusUnauthorized,
		"made-up":            http.StatusInternalServerError,
	} {
		if got := problemOf(&models.Error{Code: code, Message: "m"}).Status; got != want {
			t.Errorf("problemOf(code %q) = %d, want %d", code, got, want)
		}
	}
}
