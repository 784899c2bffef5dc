//go:build tools

// Package tools pins crd-ref-docs, which `make api-docs` builds into
// bin/crd-ref-docs.
package tools

import _ "github.com/elastic/crd-ref-docs"
