package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/shop/shop/models"
)

// lowStock is the most units of which the catalog says how many are left.
const lowStock = 5

// Availability is the line's stock in a shopper's words.
func (l catalogLine) Availability() string {
	switch n := l.Product.Stock; {
	case n <= 0:
		return "Sold out"
	case n <= lowStock:
		return "Only " + strconv.Itoa(n) + " left"
	}
	return "In stock"
}

// SoldOut reports a product that cannot be ordered until it is restocked.
func (l catalogLine) SoldOut() bool { return l.Product.Stock <= 0 }

// shortForm gives the checkout form back (409) when stock cannot cover it:
// the quantities as typed, each line short marked with what is left, and a
// fresh key. Nothing was reserved nor kept, so the key was released; a new
// one is for the new order the shopper makes of it.
func (s *Server) shortForm(c *gin.Context, view homeView, short []models.Shortage) {
	for _, sh := range short {
		for i := range view.Lines {
			line := &view.Lines[i]
			if line.Product.ID != sh.ProductID {
				continue
			}
			line.Product.Stock = sh.Left
			line.Error = "Only " + strconv.Itoa(sh.Left) + " left: you asked for " + strconv.Itoa(sh.Asked) + "."
			if sh.Left == 0 {
				line.Error = "Sold out: none left."
			}
		}
	}
	view.Key = uuid.NewString()
	view.Notice = errorNotice(models.ErrOutOfStock.Shopper.Text)
	s.renderPage(c, http.StatusConflict, "home.html", view)
}

// stockWords is a refused stock change in staff's words: each field at
// fault, named as the console's form names it.
func stockWords(e *models.Error) string {
	names := map[string]string{"stock": "The number", "reason": "The reason", "change": "The change"}
	said := make([]string, 0, len(e.Fields)+1)
	for _, f := range e.Fields {
		said = append(said, names[f.Field]+" "+f.Message+".")
	}
	return strings.Join(append(said, "Nothing was changed."), " ")
}
