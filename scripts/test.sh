#!/usr/bin/env bash
# test.sh [go test flags...]: every test of both modules. With no flags but -timeout, the end-to-end package runs as
# its shards side by side (tests/e2e/shards_test.go), each on a control plane of its own, beside the other packages;
# one test mostly waits on its engine and its cluster, so on 2 cores this takes far less time than one after the other
# (docs/contributing.md, "Set-up commands"). The other packages build one at a time (-p 1), so no two large links run at once while
# the shards' engines hold memory. Each stream's output goes to .tools/test-logs: a failed stream's is printed whole,
# a passing shard's result line only. Other flags (-run, -short, -v, -race...) run `go test` over every package as
# before, since they choose tests the shards would choose otherwise. Exits 1 if any stream failed.
set -uo pipefail
cd "$(dirname "$0")/.."
flags=("$@")
timeout=40m
sharded=1
for ((i = 0; i < ${#flags[@]}; i++)); do
	case ${flags[i]} in
	-timeout) timeout=${flags[i + 1]:-40m} && ((i++)) ;;
	-timeout=*) timeout=${flags[i]#-timeout=} ;;
	*) sharded=0 ;;
	esac
done
if ((!sharded)); then
	scripts/heartbeat.sh "go test $* ./..." go test "${flags[@]}" ./...
	root=$?
	(cd provider && ../scripts/heartbeat.sh "go test in provider/" go test "${flags[@]}" ./...)
	provider=$?
	exit $((root || provider))
fi

logs=.tools/test-logs
rm -rf "$logs" && mkdir -p "$logs"
bin=$PWD/.tools/e2e.test
scripts/heartbeat.sh "build the end-to-end tests" go test -c -o "$bin" ./tests/e2e || exit 1
# As many as tests/e2e/shards_test.go lists; the test binary refuses another count.
shards=2
mapfile -t packages < <(go list ./... | grep -v '/tests/e2e$')

declare -A names=()
pids=()
stream() {
	local name=$1
	shift
	"$@" >"$logs/$name.log" 2>&1 &
	names[$!]=$name
	pids+=($!)
}
beat=
trap 'kill "${pids[@]}" $beat 2>/dev/null' EXIT
for ((i = 0; i < shards; i++)); do
	stream "e2e-shard-$i" bash -c 'cd tests/e2e && GT_E2E_SHARD=$1 exec "$2" -test.timeout "$3"' _ "$i/$shards" "$bin" "$timeout"
done
# The provider's module runs even when the product's fails, so both say what fails.
stream "packages" bash -c 'go test -p 1 -timeout "$1" "${@:2}"; root=$?; cd provider && go test -p 1 -timeout "$1" ./...; exit $((root || $?))' \
	_ "$timeout" "${packages[@]}"
echo "==> tests: ${names[*]} side by side (logs in $logs)"
start=$SECONDS
(
	while sleep "${GT_HEARTBEAT_SECONDS:-60}"; do
		echo "    ... tests still running, $((SECONDS - start)) s"
	done
) &
beat=$!
failed=0
failures=()
running=("${pids[@]}")
while ((${#running[@]})); do
	wait -n -p done "${running[@]}"
	rc=$?
	name=${names[$done]}
	left=()
	for p in "${running[@]}"; do [[ $p == "$done" ]] || left+=("$p"); done
	running=("${left[@]}")
	if ((rc == 0)); then
		echo "==> $name: ok after $((SECONDS - start)) s"
		if [[ $name == packages ]]; then cat "$logs/$name.log"; else grep -E '^(PASS|ok)' "$logs/$name.log"; fi
	else
		failed=1
		failures+=("$name")
		echo "==> $name: FAILED (exit $rc) after $((SECONDS - start)) s"
		cat "$logs/$name.log"
	fi
done
# A failed shard's log holds its engines' output too, so the failures themselves are said again last, where a reader
# of the end of the output (a CI page) sees them: each failed test, each assertion's block and each line a failed test
# logged (t.Error's among them).
for name in "${failures[@]}"; do
	echo "==> $name: the failures in $logs/$name.log"
	awk '/--- FAIL/ || /Error Trace:/ {print; block = /Error Trace:/; next}
		block && /^ *\t/ {print; next}
		{block = 0}
		/^[[:space:]]+[A-Za-z0-9_]+_test\.go:[0-9]+: [^[:space:]]/ {print}' "$logs/$name.log" | head -300
done
exit "$failed"
