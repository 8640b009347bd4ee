// Package templates embeds the HTML templates into the binary.
package templates

import "embed"

// FS holds every template.
//
//go:embed *.html
var FS embed.FS
