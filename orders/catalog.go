package orders

import (
	"fmt"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/shop/shop/models"
)

// catalogNamespace makes product ids stable: the same SKU has the same id on
// every database and every instance.
var catalogNamespace = uuid.MustParse("6f1c1f0e-4c1a-4bb4-9a5e-6b0f3d2a7c11")

// Catalog is the seeded product list: one product nearly gone and one sold out.
var Catalog = []models.Product{
	{SKU: "TEE-BLK-M", Name: "Black T-shirt (M)", PriceCents: 1900, Currency: "USD", Stock: 10000},
	{SKU: "MUG-WHT", Name: "White mug", PriceCents: 1200, Currency: "USD", Stock: 10000},
	{SKU: "CAP-NVY", Name: "Navy cap", PriceCents: 2200, Currency: "USD", Stock: 10000},
	{SKU: "STK-PACK", Name: "Sticker pack", PriceCents: 500, Currency: "USD", Stock: 10000},
	{SKU: "HOOD-GRY-L", Name: "Grey hoodie (L)", PriceCents: 4900, Currency: "USD", Stock: 10000},
	{SKU: "BOOK-IDEM", Name: "Book: Retries Without Fear", PriceCents: 3500, Currency: "USD", Stock: 10000},
	{SKU: "TOTE-CNV", Name: "Canvas tote bag", PriceCents: 1500, Currency: "USD", Stock: 3},
	{SKU: "VINYL-LTD", Name: "Vinyl record (limited edition)", PriceCents: 2900, Currency: "USD", Stock: 0},
}

// Seed inserts the catalog, leaving existing SKUs alone; safe from several
// instances at once.
func Seed(db *gorm.DB) error {
	products := make([]models.Product, len(Catalog))
	for i, p := range Catalog {
		p.ID = uuid.NewSHA1(catalogNamespace, []byte(p.SKU)).String()
		products[i] = p
	}
	// No conflict target: PostgreSQL checks a target's index alone, and two
	// instances racing would then break on the primary key instead.
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&products).Error; err != nil {
		return fmt.Errorf("seed catalog: %w", err)
	}
	return nil
}
