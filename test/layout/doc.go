// Package layout checks that the developer documents match the tree:
// docs/development.md is a map of it (every Go package and every top-level
// folder has its line in the Layout section, and every folder named there
// exists), and docs/api.md is what `make api-docs` writes from the API types;
// see layout_test.go.
package layout
