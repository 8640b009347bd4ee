// Package static embeds the stylesheets and the one script of the pages.
package static

import "embed"

// FS holds simple.min.css (Simple.css 2.3.7, MIT, vendored from npm as
// simpledotcss; its licence is simple.LICENSE), app.css and app.js, and
// redoc.standalone.js (Redoc 2.5.4, MIT, copied from npm's
// redoc/bundles/; its licence and bundled notices are redoc.LICENSE), which
// renders /docs/api.
//
//go:embed *.css *.js *.LICENSE
var FS embed.FS
