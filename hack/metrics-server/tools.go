//go:build tools

// Package metricsserver pins the metrics-server command the Makefile builds.
package metricsserver

import (
	_ "sigs.k8s.io/metrics-server/cmd/metrics-server"
)
