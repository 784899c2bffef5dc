//go:build tools

// Package tools pins the developer tools `make verify` builds from the Go
// module proxy, in a module of their own so that their dependencies never
// enter Deckhand's.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
)
