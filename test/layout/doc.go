// Package layout checks that docs/development.md is a map of the tree as it
// is: every Go package and every top-level folder has its line in the
// Layout section, and every folder named there exists; see layout_test.go.
package layout
