//go:build tools

// Package kruise pins the OpenKruise manager that build.sh builds as the
// benchmarks' baseline.
package kruise

import (
	_ "github.com/openkruise/kruise"
)
