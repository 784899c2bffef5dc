#!/usr/bin/env bash
# Prints the main module's test packages of one kind, one import path a line:
#   integration  packages whose tests start a control plane: a TestMain with
#                testenv.Run or testutil.RunSuite, or a test calling
#                localcluster.Start (directly or through startCluster)
#   unit         every other package of ./...
#   short        what `make test-unit` runs with -short: every package of
#                ./... but those whose TestMain runs nothing in -short mode
#                (testenv.Run or testutil.RunSuite, and no test file asking
#                testing.Short() to run some tests without them), which would
#                only be compiled and linked to skip
# `make test` runs the first two lists one after the other so that it can say
# which step it is in. Every package is in exactly one of them, so whatever
# the patterns below miss still runs, only under the other heading; a package
# the short list keeps by mistake costs time, never a test.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each package of ./... with its test files, one a line: "pkg file...".
tests=$(go list -e -f '{{$d := .Dir}}{{.ImportPath}}{{range .TestGoFiles}} {{$d}}/{{.}}{{end}}{{range .XTestGoFiles}} {{$d}}/{{.}}{{end}}' ./...)

# matching PATTERN [EXCEPT]: the packages some test file of which matches
# PATTERN, and none of which matches EXCEPT.
matching() {
  echo "$tests" | while read -r pkg files; do
    if [ -n "$files" ] && grep -qE "$1" $files && { [ -z "${2:-}" ] || ! grep -qE "$2" $files; }; then
      echo "$pkg"
    fi
  done
}

# all_but LIST: the packages of ./... not in LIST.
all_but() { echo "$tests" | cut -d' ' -f1 | grep -vxF -f <(echo "$1"); }

case "${1:-}" in
integration) matching 'testenv\.Run\(|testutil\.RunSuite\(|localcluster\.Start\(|startCluster\(' ;;
unit) all_but "$(matching 'testenv\.Run\(|testutil\.RunSuite\(|localcluster\.Start\(|startCluster\(')" ;;
short) all_but "$(matching 'testenv\.Run\(|testutil\.RunSuite\(' 'testing\.Short\(\)')" ;;
*) echo "usage: $0 integration|unit|short" >&2; exit 2 ;;
esac
