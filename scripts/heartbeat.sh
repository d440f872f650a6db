#!/usr/bin/env bash
# heartbeat.sh [-q] LABEL CMD...: says what is about to run (unless -q), runs it, and while it runs says every
# GT_HEARTBEAT_SECONDS (default 30) that it still does, so a cold build of several minutes does not read as a hang. A
# command done sooner prints nothing more. The command's output and exit status pass through.
set -uo pipefail
quiet=0
if [[ ${1:-} == -q ]]; then
	quiet=1
	shift
fi
label=$1
shift
((quiet)) || echo "==> $label"
start=$SECONDS
(
	while sleep "${GT_HEARTBEAT_SECONDS:-30}"; do
		echo "    ... $label: still running, $((SECONDS - start)) s"
	done
) &
beat=$!
"$@"
rc=$?
kill "$beat" 2>/dev/null
wait "$beat" 2>/dev/null
exit "$rc"
