#!/usr/bin/env bash
# make demo / make demo-down: the local stack on a local control plane, with real nodes when run as root (each tenant's
# vCluster runs, and so do its pods), else simulated GPU nodes (pods are scheduled, nothing runs).
#   scripts/demo.sh up     build the tools the demo runs, start the control plane, apply the stack, print what each
#                          tenant sees and claims
#   scripts/demo.sh down   destroy the stack and stop the control plane
# Both recover on their own: a crashed or stopped control plane is started again with its data; the local stack's
# state goes, with a message, when its cluster was purged or replaced; an interrupted demo is recovered first.
#
# Environment:
#   GT_NODES   the real nodes, one per pool (scripts/local-nodes.sh); default, as root, "system a100-whole a100-mig";
#              "none" keeps the simulated GPU nodes
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cluster=.tools/local-cluster
if [[ -z ${GT_NODES+set} ]]; then
	if ((EUID == 0)); then
		export GT_NODES="system a100-whole a100-mig"
	else
		echo "demo: not root, so the GPU nodes are simulated and no pod runs (real nodes need root; GT_NODES=none chooses simulated nodes without this note)" >&2
	fi
elif [[ $GT_NODES == none ]]; then
	unset GT_NODES
fi
case "${1:-up}" in
up)
	if [[ -n ${GT_NODES:-} ]]; then
		scripts/build-tools.sh demo-nodes
	else
		scripts/build-tools.sh demo
	fi
	# Starts whatever is not running: a fresh cluster after a purge, the same one (its data kept) after a crash.
	scripts/local-cluster.sh up
	# The demo links the Pulumi program and the cloud SDKs: minutes on a cold Go build cache, seconds after.
	scripts/heartbeat.sh "demo: compiling the Pulumi program and the demo (a cold build takes minutes)" \
		go build -o .tools/bin/gpu-tenancy-demo ./scripts/demo
	.tools/bin/gpu-tenancy-demo up
	scripts/heartbeat.sh "demo: compiling the operators' CLI (bin/gpu-tenancy)" go build -o bin/gpu-tenancy ./cmd/gpu-tenancy
	kubeconfig=$cluster/kubeconfig
	echo
	echo "==> bin/gpu-tenancy capacity: devices per class, and what each tenant holds against its quota"
	bin/gpu-tenancy capacity --kubeconfig "$kubeconfig"
	echo
	echo "==> bin/gpu-tenancy pending: claims that wait, and why"
	bin/gpu-tenancy pending --kubeconfig "$kubeconfig"
	;;
down)
	# The stack's objects live in the control plane's etcd: a stopped or crashed one is started again so that the
	# destroy can delete them. Without a control plane (never started, or purged), or when it does not start,
	# `demo down` drops the local stack's state instead.
	if [[ -f $cluster/kubeconfig ]]; then
		scripts/local-cluster.sh up || echo "demo: the local control plane does not start; the stack's state goes without a destroy" >&2
	fi
	rc=0
	scripts/heartbeat.sh "demo: compiling the Pulumi program and the demo (a cold build takes minutes)" \
		go build -o .tools/bin/gpu-tenancy-demo ./scripts/demo || rc=$?
	((rc)) || .tools/bin/gpu-tenancy-demo down || rc=$?
	# Stopped whatever the destroy did: a failed destroy is reported, and the control plane keeps its data for a retry.
	scripts/local-cluster.sh down
	exit "$rc"
	;;
*)
	echo "usage: scripts/demo.sh up|down" >&2
	exit 2
	;;
esac
