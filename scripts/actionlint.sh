#!/usr/bin/env bash
# Lints the GitHub workflows with actionlint, pinned in scripts/tools/actionlint/go.mod. Builds it into .tools/bin
# from the Go module proxy when it is missing or the pin (or the Go toolchain) changed; otherwise just runs it.
#
#   scripts/actionlint.sh                 lint every workflow under .github/workflows
#   scripts/actionlint.sh FILE...         lint the given workflow files (any actionlint flag works too)
#
# actionlint also runs shellcheck on `run:` scripts when shellcheck is on PATH (Debian package shellcheck).
#
# Environment:
#   GT_TOOLS_DIR     output root (default <repo>/.tools)
#   GT_HEAVY_LOCK    lock file serialising heavy builds (default /tmp/gt-heavy.lock)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MOD=$ROOT/scripts/tools/actionlint
TOOLS=${GT_TOOLS_DIR:-$ROOT/.tools}
BIN=$TOOLS/bin/actionlint
STAMP=$TOOLS/stamps/actionlint
LOCK=${GT_HEAVY_LOCK:-/tmp/gt-heavy.lock}

command -v go >/dev/null || {
	echo "actionlint.sh: go is not on PATH" >&2
	exit 1
}

stamp=$({
	go env GOVERSION GOOS GOARCH
	cat "$MOD/go.mod" "$MOD/go.sum"
} | sha256sum | cut -d' ' -f1)

if [[ ! -x $BIN || ! -f $STAMP || "$(cat "$STAMP")" != "$stamp" ]]; then
	mkdir -p "$(dirname "$BIN")" "$(dirname "$STAMP")"
	version=$(awk '$1 == "github.com/rhysd/actionlint" { print $2 }' "$MOD/go.mod")
	echo "actionlint.sh: building actionlint $version into $BIN" >&2
	tmp=$(mktemp "$BIN.XXXXXX")
	trap 'rm -f "$tmp"' EXIT
	build=(go build -C "$MOD" -trimpath -o "$tmp" github.com/rhysd/actionlint/cmd/actionlint)
	if command -v flock >/dev/null; then
		flock "$LOCK" "${build[@]}"
	else
		"${build[@]}"
	fi
	mv "$tmp" "$BIN"
	trap - EXIT
	echo "$stamp" >"$STAMP"
fi

cd "$ROOT"
exec "$BIN" "$@"
