// Package templates is how the pages read: the HTML templates, embedded
// and parsed once, the shop's words for money, times, statuses and cards
// they use, rendered into a buffer.
package templates

import "embed"

// FS holds every template.
//
//go:embed *.html
var FS embed.FS
