#!/usr/bin/env bash
# Builds the local control-plane binaries into bin/k8s/ from the Go module
# proxy only: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl
# (k8s.io/kubernetes), etcd and kwok, plus the kwok Stage files.
#
# Idempotent: a stamp file records the versions built; when it matches the
# pins in this module's go.mod, nothing is rebuilt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="${K8S_BIN_DIR:-$root/bin/k8s}"
cd "$here"

mod_version() { go list -m -f '{{.Version}}' "$1"; }
kube=$(mod_version k8s.io/kubernetes)
etcd=$(mod_version go.etcd.io/etcd/server/v3)
kwok=$(mod_version sigs.k8s.io/kwok)
goversion=$(go env GOVERSION)
want="kubernetes=$kube etcd=$etcd kwok=$kwok go=$goversion"

stamp="$out/.versions"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
complete=1
for b in "${bins[@]}"; do [ -x "$out/$b" ] || complete=0; done
[ -f "$out/kwok-stages.yaml" ] || complete=0
if [ "$complete" = 1 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo ">> Kubernetes binaries up to date in $out (kubernetes $kube, etcd $etcd, kwok $kwok)"
  exit 0
fi

mkdir -p "$out"
rm -f "$stamp"
start=$SECONDS
echo ">> building the Kubernetes binaries into $out (first run only, about 10 minutes on 2 cores)"
# The four Kubernetes binaries in one go build, so that the packages they
# share are compiled once and their links (single-threaded, the longest
# steps) run side by side; etcd and kwok build beside them. Each announces
# itself when it starts and when it is done.
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/client-go/pkg/version.gitVersion=$kube"
kube_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
build() { # name, then the go build arguments
  local name=$1; shift
  echo ">> building $name"
  go build -trimpath "$@"
  echo ">> built $name ($((SECONDS - start))s so far)"
}
pids=()
build "${kube_bins[*]} $kube" -ldflags "$kube_ldflags" -o "$out/" "${kube_bins[@]/#/k8s.io/kubernetes/cmd/}" & pids+=($!)
build "etcd $etcd" -ldflags "-s -w" -o "$out/etcd" go.etcd.io/etcd/server/v3 & pids+=($!)
build "kwok $kwok" -ldflags "-s -w" -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok & pids+=($!)
for p in "${pids[@]}"; do wait "$p"; done

# kwok refuses to start without Stage objects; the module ships the ones that
# make fake nodes Ready and walk pods through their lifecycle.
stages=$(go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
{
  for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
           pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$stages/$f"
  done
} >"$out/kwok-stages.yaml"

echo "$want" >"$stamp"
echo ">> control-plane binaries ready in $out ($((SECONDS - start))s)"
