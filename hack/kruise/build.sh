#!/usr/bin/env bash
# Builds OpenKruise's kruise-manager into bin/kruise/ from the Go module proxy
# only, with the CustomResourceDefinitions it serves in bin/kruise/crds/. The
# benchmarks run it beside Deckhand as a baseline; nothing else uses it.
#
# Idempotent: a stamp file records the release and toolchain built; when it
# matches the pin in this module's go.mod, nothing is rebuilt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="${KRUISE_BIN_DIR:-$root/bin/kruise}"
cd "$here"

kruise=$(go list -m -f '{{.Version}}' github.com/openkruise/kruise)
goversion=$(go env GOVERSION)
want="kruise=$kruise go=$goversion"

stamp="$out/.versions"
if [ -x "$out/kruise-manager" ] && [ -f "$out/crds/apps.kruise.io_sidecarsets.yaml" ] &&
   [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi

mkdir -p "$out"
rm -f "$stamp"
start=$SECONDS
echo ">> building kruise-manager $kruise (first run only, several minutes)"
go build -trimpath -ldflags "-s -w" -o "$out/kruise-manager.tmp" github.com/openkruise/kruise
mv "$out/kruise-manager.tmp" "$out/kruise-manager"

# Every CRD of the release, not only SidecarSet's: the manager exits at
# start without some of its kinds and waits on discovery retries for each
# other missing one (docs/bench-kruise.md).
src=$(go list -m -f '{{.Dir}}' github.com/openkruise/kruise)/config/crd/bases
rm -rf "$out/crds"
mkdir -p "$out/crds"
cp "$src"/*.yaml "$out/crds/"
chmod u+w "$out/crds"/*.yaml

echo "$want" >"$stamp"
echo ">> kruise-manager ready in $out ($((SECONDS - start))s)"
