// Package static embeds the stylesheets and the one script of the pages,
// and redoc.standalone.js, which renders /docs/api: Redoc 2.5.4 (MIT),
// copied from npm's redoc/bundles/; its licence and bundled notices are
// redoc.LICENSE.
package static

import "embed"

// FS holds simple.min.css (Simple.css 2.3.7, MIT, vendored from npm as
// simpledotcss; its licence is simple.LICENSE), app.css, app.js and the
// favicon.
//
//go:embed *.css *.js *.svg *.LICENSE
var FS embed.FS
