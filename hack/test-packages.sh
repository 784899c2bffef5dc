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
#   all          every package of ./..., the longest suites first: what
#                `make test` runs, in one `go test`
# Every package is in exactly one of integration and unit, so whatever the
# patterns below miss still runs, only under the other heading; a package
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

# The suites that take longest (minutes each, measured in `make test`'s
# output), longest first: `go test` starts packages in the order it is given
# them, two at a time on two cores, so starting these first keeps one long
# suite from running alone at the end.
longest='test/reliability
internal/controller/restartschedule/metricstrigger
test/walkthrough
internal/controller/podset
internal/controller/sidecarset
internal/controller/restartschedule
internal/test/localcluster
test/helm
test/hostile
test/e2e'

# ordered: every package of ./... once, the longest suites first.
ordered() {
  local first
  first=$(echo "$longest" | sed 's|^|github.com/deckhand-dev/deckhand/|' | grep -xF -f <(echo "$tests" | cut -d' ' -f1))
  echo "$first"
  all_but "$first"
}

case "${1:-}" in
all) ordered ;;
integration) matching 'testenv\.Run\(|testutil\.RunSuite\(|localcluster\.Start\(|startCluster\(' ;;
unit) all_but "$(matching 'testenv\.Run\(|testutil\.RunSuite\(|localcluster\.Start\(|startCluster\(')" ;;
short) all_but "$(matching 'testenv\.Run\(|testutil\.RunSuite\(' 'testing\.Short\(\)')" ;;
*) echo "usage: $0 all|integration|unit|short" >&2; exit 2 ;;
esac
