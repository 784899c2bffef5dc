// Package layout checks the tree against its house rules: docs/development.md
// is a map of it (every Go package and every top-level folder has its line in
// the Layout section, and every folder named there exists), docs/api.md is
// what `make api-docs` writes from the API types, and no hand-written Go file
// outside api/ is longer than 400 lines; see layout_test.go.
package layout
