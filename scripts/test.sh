#!/usr/bin/env bash
# test.sh [go test flags...]: every test of both modules. The end-to-end package runs as its shards side by side
# (tests/e2e/shards_test.go), each on a control plane of its own, beside the other packages; they mostly wait on
# their engines and clusters, so on 2 cores this takes about half the time of one after the other. The other
# packages build one at a time (-p 1), so no two large links run at once while the shards' engines hold memory.
# Each stream's output goes to .tools/test-logs and is printed when it ends; the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
flags=("$@")
logs=.tools/test-logs
rm -rf "$logs" && mkdir -p "$logs"
bin=$PWD/.tools/e2e.test
scripts/heartbeat.sh "build the end-to-end tests" go test -c -o "$bin" ./tests/e2e || exit 1
timeout=40m
for f in "${flags[@]}"; do
	[[ $f == -timeout=* ]] && timeout=${f#-timeout=}
done
for ((i = 1; i < ${#flags[@]}; i++)); do
	[[ ${flags[i - 1]} == -timeout ]] && timeout=${flags[i]}
done
# As many as tests/e2e/shards_test.go lists; the test binary refuses another count.
shards=2

names=() pids=()
stream() {
	local name=$1
	shift
	names+=("$name")
	scripts/heartbeat.sh -q "$name" "$@" >"$logs/$name.log" 2>&1 &
	pids+=($!)
}
for ((i = 0; i < shards; i++)); do
	stream "e2e-shard-$i" bash -c "cd tests/e2e && GT_E2E_SHARD=$i/$shards exec '$bin' -test.timeout $timeout"
done
packages=$(go list ./... | grep -v '/tests/e2e$' | tr '\n' ' ')
# shellcheck disable=SC2086 # the package list is words
stream "packages" bash -c "go test -p 1 ${flags[*]} $packages && cd provider && go test -p 1 ${flags[*]} ./..."
echo "==> tests: ${names[*]} side by side (logs in $logs)"
start=$SECONDS
(
	while sleep "${GT_HEARTBEAT_SECONDS:-60}"; do
		echo "    ... tests still running, $((SECONDS - start)) s"
	done
) &
beat=$!
failed=0
for i in "${!pids[@]}"; do
	if wait "${pids[i]}"; then
		status=ok
	else
		status=FAILED
		failed=1
	fi
	echo "==> ${names[i]}: $status after $((SECONDS - start)) s"
	# As go test does for a package in list mode: a shard's whole output only when it failed.
	if [[ $status == FAILED || ${names[i]} == packages ]]; then
		cat "$logs/${names[i]}.log"
	else
		tail -n 1 "$logs/${names[i]}.log"
	fi
done
kill "$beat" 2>/dev/null
wait "$beat" 2>/dev/null
exit "$failed"
