package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/shop/shop/models"
	"github.com/shop/shop/orders"
)

// The catalogs an order buys from (-catalog).
const (
	// catalogHot: every order buys the same two products, 2 and 1 units,
	// so every order reserves on the same two rows: on PostgreSQL each
	// holds their row locks from its reservation to its commit, and the
	// orders queue on them (a hot row). On SQLite the one writer queues
	// them anyway.
	catalogHot = "hot"
	// catalogSpread: each order buys two products drawn from spreadProducts
	// made for the run, so that concurrent orders seldom share a row.
	catalogSpread = "spread"
)

// spreadProducts is the size of the spread catalog: with the default 8
// workers, two concurrent orders share a product about one time in 16.
const spreadProducts = 64

// setCatalog picks the products the orders buy and gives them stock that
// never runs out: the bench measures orders placed, each reserving its
// units, not orders refused out-of-stock.
func (b *bench) setCatalog() error {
	db := b.db
	switch b.cfg.Catalog {
	case catalogHot, "":
		if err := db.Order("sku").Limit(2).Find(&b.products).Error; err != nil || len(b.products) < 2 {
			return fmt.Errorf("catalog: %v", err)
		}
	case catalogSpread:
		if !b.cfg.FreshOnly && !b.cfg.BareOnly {
			return fmt.Errorf("-catalog %s: only with -fresh-only or -bare-only (the replays send the hot catalog's body)", catalogSpread)
		}
		for i := range spreadProducts {
			sku := fmt.Sprintf("BENCH-%s-%02d", b.run, i)
			b.products = append(b.products, models.Product{ID: fmt.Sprintf("bench-%s-%02d", b.run, i), SKU: sku, Name: sku, PriceCents: 100, Currency: "USD"})
		}
		if err := db.Create(&b.products).Error; err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
	default:
		return fmt.Errorf("-catalog %q: %s or %s", b.cfg.Catalog, catalogHot, catalogSpread)
	}
	ids := make([]string, len(b.products))
	for i, p := range b.products {
		ids[i] = p.ID
	}
	if err := db.Model(&models.Product{}).Where("id IN ?", ids).Update("stock", math.MaxInt32).Error; err != nil {
		return fmt.Errorf("stock: %w", err)
	}
	for _, p := range b.products {
		if b.cfg.Catalog != catalogSpread && b.cfg.StockSlots > 1 {
			if _, err := (orders.Store{DB: db}).SplitStock(context.Background(), p.SKU, b.cfg.StockSlots); err != nil {
				return fmt.Errorf("stock slots: %w", err)
			}
		}
	}
	b.orderBody = orderOf(b.products[0].ID, b.products[1].ID)
	return nil
}

func orderOf(p, q string) string {
	return fmt.Sprintf(`{"items":[{"product_id":%q,"quantity":2},{"product_id":%q,"quantity":1}]}`, p, q)
}

// freshBody is the body of a fresh order: the hot catalog's, or two
// products of the spread catalog at random.
func (b *bench) freshBody() string {
	if b.cfg.Catalog != catalogSpread {
		return b.orderBody
	}
	p, q := b.pair()
	return orderOf(p.ID, q.ID)
}

// pair is what an order buys, 2 units of p and 1 of q: the hot catalog's
// two products, or two of the spread catalog at random.
func (b *bench) pair() (p, q models.Product) {
	if b.cfg.Catalog != catalogSpread {
		return b.products[0], b.products[1]
	}
	i := rand.IntN(len(b.products))
	j := (i + 1 + rand.IntN(len(b.products)-1)) % len(b.products)
	return b.products[i], b.products[j]
}
