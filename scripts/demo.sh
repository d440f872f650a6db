#!/usr/bin/env bash
# make demo / make demo-down: the local stack on a local control plane with simulated GPU nodes.
#   scripts/demo.sh up     start the control plane, apply the stack, print what each tenant sees and claims
#   scripts/demo.sh down   destroy the stack and stop the control plane
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-up}" in
up)
	scripts/local-cluster.sh up
	go run ./scripts/demo up
	go build -o bin/gpu-tenancy ./cmd/gpu-tenancy
	kubeconfig=.tools/local-cluster/kubeconfig
	echo
	echo "==> bin/gpu-tenancy capacity: devices per class, and what each tenant holds against its quota"
	bin/gpu-tenancy capacity --kubeconfig "$kubeconfig"
	echo
	echo "==> bin/gpu-tenancy pending: claims that wait, and why"
	bin/gpu-tenancy pending --kubeconfig "$kubeconfig"
	;;
down)
	if scripts/local-cluster.sh status >/dev/null 2>&1; then
		go run ./scripts/demo down
	fi
	scripts/local-cluster.sh down
	;;
*)
	echo "usage: scripts/demo.sh up|down" >&2
	exit 2
	;;
esac
