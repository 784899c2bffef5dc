//go:build tools

// Package tools pins the Helm CLI that `make helm` builds into bin/helm.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
