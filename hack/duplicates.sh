#!/usr/bin/env bash
# Runs the `duplicates` tool over a copy of the tree (tracked files and
# untracked ones git does not ignore, as they are in the working tree) in
# which the lines inside Go `import ( ... )` blocks are blanked, keeping
# every line number. The tool passes single import lines over but reads the
# lines of an import block as code, so two files that import the same six
# packages would count as a pair; in the copy only code counts.
# Arguments go to the tool (for example --most 40); for a change's own
# duplicates run `duplicates --change` in the checkout itself.
set -euo pipefail
command -v duplicates >/dev/null || { echo "hack/duplicates.sh: the duplicates tool is not on PATH" >&2; exit 2; }
cd "$(git rev-parse --show-toplevel)"
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
# One tar reads the whole list (xargs could split it into several archives,
# and the extracting tar stops at the first one's end).
git ls-files -z --cached --others --exclude-standard |
	tar --null -T - -cf - --ignore-failed-read 2>/dev/null | tar -xf - -C "$copy"
find "$copy" -name '*.go' -exec perl -0pi -e \
	's{^import \(\n.*?^\)\n}{my $m = $&; "\n" x ($m =~ tr/\n//)}gmse' {} +
duplicates --repo "$copy" "$@"
