#!/usr/bin/env bash
# Prints the main module's test packages of one kind, one import path a line:
#   integration  packages whose tests start a control plane: a TestMain with
#                testenv.Run or testutil.RunSuite, or a test calling
#                localcluster.Start (directly or through startCluster)
#   unit         every other package of ./...
# `make test` runs the two lists one after the other so that it can say which
# step it is in. Every package is in exactly one list, so whatever the
# patterns below miss still runs, only under the other heading.
set -euo pipefail
cd "$(dirname "$0")/.."

pattern='testenv\.Run\(|testutil\.RunSuite\(|localcluster\.Start\(|startCluster\('
integration=$(go list -e -f '{{$d := .Dir}}{{.ImportPath}}{{range .TestGoFiles}} {{$d}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$d}}/{{.}}{{end}}' ./... |
  while read -r pkg files; do
    if [ -n "$files" ] && grep -qE "$pattern" $files; then echo "$pkg"; fi
  done)

case "${1:-}" in
integration) echo "$integration" ;;
unit) go list -e ./... | grep -vxF -f <(echo "$integration") ;;
*) echo "usage: $0 integration|unit" >&2; exit 2 ;;
esac
