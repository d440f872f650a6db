#!/usr/bin/env bash
# A profile of what a run compiles: which package, when, for how long and how often, across every go command of the
# run (go vet, the tools' builds, the tests), so a cold set-up's cost can be read per package.
#
#   GOFLAGS=-toolexec=$PWD/scripts/compile-profile.sh GT_COMPILE_LOG=/tmp/compiles.tsv make demo
#   scripts/compile-profile.sh --summary /tmp/compiles.tsv
#
# As the toolexec of every go command it runs each compile and link and appends "tool start end package" to
# GT_COMPILE_LOG (absolute path); the summary prints the compile time in all, the module paths that cost the most,
# the packages compiled more than once (by another module's version of them, or another build configuration) and the
# slowest compiles. The toolexec is part of every compile's cache key, so a profiled build shares no cache entry with
# an unprofiled one.
set -euo pipefail

if [[ ${1:-} == --summary ]]; then
	log=${2:?usage: $0 --summary LOG}
	awk -F'\t' '
	$1 == "compile" {
		d = $3 - $2; total += d; n++
		count[$4]++; spent[$4] += d
		# a module path: host and two more elements (github.com/pulumi/pulumi-gcp/sdk/v9/... -> github.com/pulumi/pulumi-gcp)
		split($4, p, "/"); m = "(standard library)"; if (p[1] ~ /\./) m = p[1] "/" p[2] "/" p[3]
		bymod[m] += d; if (first == "" || $2 < first) first = $2; if ($3 > last) last = $3
	}
	$1 == "link" { links++; linking += $3 - $2 }
	END {
		printf "compiles: %d of %d packages, %.0f s of compile time (CPU, one core each) over %.0f s of wall time; links: %d, %.0f s\n", n, length(count), total, last - first, links, linking
		print "\nmodule paths by compile time:"
		for (m in bymod) printf "%8.1f s  %s\n", bymod[m], m | "sort -rn | head -15"
		close("sort -rn | head -15")
		print "\npackages compiled more than once (times, compile time in all):"
		for (k in count) if (count[k] > 1) printf "%3d  %8.1f s  %s\n", count[k], spent[k], k | "sort -k2 -rn | head -25"
		close("sort -k2 -rn | head -25")
		print "\nslowest packages:"
		for (k in spent) printf "%8.1f s  %s\n", spent[k], k | "sort -rn | head -15"
	}' "$log"
	exit 0
fi

tool=$(basename "$1")
case $tool in
compile | link) ;;
*) exec "$@" ;;
esac
pkg='' prev=''
for a in "$@"; do
	# go asks each tool for its version to key the cache: nothing is compiled then.
	[[ $a == -V=full ]] && exec "$@"
	[[ $prev == -p || ($tool == link && $prev == -o) ]] && pkg=$a
	prev=$a
done
start=$(date +%s.%N)
rc=0
"$@" || rc=$?
printf '%s\t%s\t%s\t%s\n' "$tool" "$start" "$(date +%s.%N)" "$pkg" >>"${GT_COMPILE_LOG:?set GT_COMPILE_LOG to an absolute path}"
exit "$rc"
