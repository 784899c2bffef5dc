//go:build tools

// Package prometheus pins the Prometheus command the Makefile builds.
package prometheus

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
)
