#!/usr/bin/env bash
# Writes the release artefacts of VERSION into OUT (make release):
#   install.yaml                          the installer, image pinned to VERSION
#   deckhand-<chart version>.tgz          the Helm chart, version and appVersion set
#   kubectl-deckhand_<VERSION>_<os>_<arch>.tar.gz   the kubectl plugin per platform
#                                         (kubectl-deckhand.exe on Windows)
#   deckhand.yaml                         the krew manifest for those archives
#   SHA256SUMS                            checksums of every file above
# Inputs (environment): VERSION (vX.Y.Z), OUT, IMG_NAME, HELM, KUBECTL,
# PLATFORMS (space-separated os/arch), REVISION, LDFLAGS_PKG.
set -euo pipefail

: "${VERSION:?}" "${OUT:?}" "${IMG_NAME:?}" "${HELM:?}" "${KUBECTL:?}" "${PLATFORMS:?}" "${REVISION:?}" "${LDFLAGS_PKG:?}"
if ! [[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "make release: VERSION must look like v1.2.3 (got '$VERSION')" >&2
  exit 1
fi
root=$(cd "$(dirname "$0")/.." && pwd)
chart_version=${VERSION#v}
rm -rf "$OUT"
mkdir -p "$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. The installer, rendered exactly as build-installer renders it.
make -C "$root" --no-print-directory -s build-installer IMG="$IMG_NAME:$VERSION" INSTALLER="$OUT/install.yaml" KUBECTL="$KUBECTL" >/dev/null

# 2. The chart, from a copy whose Chart.yaml carries the release's versions.
cp -r "$root/charts/deckhand" "$tmp/deckhand"
sed -i -e "s/^version: .*/version: $chart_version/" -e "s/^appVersion: .*/appVersion: \"$VERSION\"/" "$tmp/deckhand/Chart.yaml"
"$HELM" lint --strict "$tmp/deckhand" >/dev/null
"$HELM" package "$tmp/deckhand" --destination "$OUT" >/dev/null

# 3. The kubectl plugin, one archive per platform (static, no cgo).
ldflags="-s -w -X $LDFLAGS_PKG.Version=$VERSION -X $LDFLAGS_PKG.Revision=$REVISION"
for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  dir="$tmp/plugin-$os-$arch"
  bin=kubectl-deckhand
  # Windows runs only files named .exe; krew's manifest names it so too.
  if [ "$os" = windows ]; then bin=kubectl-deckhand.exe; fi
  mkdir -p "$dir"
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$dir/$bin" ./cmd/kubectl-deckhand)
  cp "$root/LICENSE" "$dir/"
  # Reproducible archives: fixed order, owner and time. Krew unpacks
  # .tar.gz on every platform, Windows included, so there is one format.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
    -C "$dir" -czf "$OUT/kubectl-deckhand_${VERSION}_${os}_${arch}.tar.gz" "$bin" LICENSE
done

# 4. The krew manifest: the template's platforms that were built, with
#    their checksums and the version filled in.
built=" "
subst=(-e "s/\${VERSION}/$VERSION/g")
for platform in $PLATFORMS; do
  os=${platform%/*} arch=${platform#*/}
  built+="${os}_${arch} "
  sum=$(sha256sum "$OUT/kubectl-deckhand_${VERSION}_${os}_${arch}.tar.gz" | cut -d' ' -f1)
  key="SHA256_$(echo "${os}_${arch}" | tr '[:lower:]' '[:upper:]')"
  subst+=(-e "s/\${$key}/$sum/g")
done
awk -v built="$built" '
  function flush() { if (block != "" && index(built, " " os "_" arch " ") > 0) printf "%s", block; block = ""; os = ""; arch = "" }
  !inblock && /^#/ { next }
  /^  - selector:/ { flush(); inblock = 1 }
  inblock && /^        os: / { os = $2 }
  inblock && /^        arch: / { arch = $2 }
  { if (inblock) block = block $0 "\n"; else print }
  END { flush() }
' "$root/plugins/krew/deckhand.yaml" | sed "${subst[@]}" > "$OUT/deckhand.yaml.body"
{ echo "# Krew manifest of kubectl-deckhand $VERSION, written by make release."; cat "$OUT/deckhand.yaml.body"; } > "$OUT/deckhand.yaml"
rm "$OUT/deckhand.yaml.body"
if grep -q '\${' "$OUT/deckhand.yaml"; then
  echo "make release: unfilled placeholders in the krew manifest:" >&2
  grep -n '\${' "$OUT/deckhand.yaml" >&2
  exit 1
fi

# 5. Checksums of everything above.
(cd "$OUT" && sha256sum -- * | grep -v ' SHA256SUMS$' > SHA256SUMS)
echo "wrote $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
