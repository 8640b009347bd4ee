package models

// Shortage is a line of an order that stock cannot cover: Left units of
// the product, Asked for.
type Shortage struct {
	ProductID string
	Name      string
	Left      int
	Asked     int
}
