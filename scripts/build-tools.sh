#!/usr/bin/env bash
# Builds the tools the local end-to-end tests need into .tools/ from the pinned modules under
# scripts/tools (see scripts/tools/README.md). Everything comes from the Go module proxy by module
# path; nothing fetched is committed.
#
#   scripts/build-tools.sh            build what is missing or out of date (a cold build takes minutes)
#   scripts/build-tools.sh demo       only what `make demo` runs on simulated nodes: etcd, the control plane, the pulumi
#                                     CLI, the kubernetes provider and the vCluster chart
#   scripts/build-tools.sh demo-nodes what `make demo` runs on real nodes: the above, containerd and the nodes' images
#   scripts/build-tools.sh --force    rebuild everything
#
# Output:
#   .tools/bin/{pulumi,pulumi-language-yaml,etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kube-state-metrics,
#               vcluster-config,promql-eval}
#   .tools/bin/{kubelet,kube-proxy,containerd,containerd-shim-runc-v2,ctr,local-path-provisioner,kube-router}  the real nodes
#                                     (scripts/local-nodes.sh)
#   .tools/bin/sim-dra-plugin         the real GPU nodes' simulated NVIDIA DRA kubelet plugin, rebuilt on every run
#   .tools/nodeimages/{mkimage,pause,gpu-probe,podcheck,vcluster,kine,coredns}  what the nodes' images are packed
#                                     with and from
#   .tools/nodeimages/registry        a private registry on the nodes' network (tests/nodes)
#   .tools/bin/gpu-tenancy-policy     the project's policy pack (./policy), rebuilt on every run
#   .tools/bin/pulumi-resource-gpu-tenancy  the component provider (./provider), rebuilt on every run
#   .tools/pulumi-home/plugins/resource-kubernetes-v4.32.0/pulumi-resource-kubernetes
#       (run the engine with PULUMI_HOME=.tools/pulumi-home; the provider is deliberately not on
#       PATH: the engine prefers a $PATH plugin over the plugin cache and warns on every run)
#   .tools/charts/vcluster            writable copy of the vCluster chart
#
# Environment:
#   GT_TOOLS_DIR     output root (default <repo>/.tools)
#   GT_PULUMI_HOME   where the kubernetes plugin is installed (default $GT_TOOLS_DIR/pulumi-home)
#   GT_HEAVY_LOCK    lock file serialising heavy builds (default /tmp/gt-heavy.lock)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODS=$ROOT/scripts/tools
TOOLS=${GT_TOOLS_DIR:-$ROOT/.tools}
BIN=$TOOLS/bin
STAMPS=$TOOLS/stamps
PULUMI_HOME_DIR=${GT_PULUMI_HOME:-$TOOLS/pulumi-home}
LOCK=${GT_HEAVY_LOCK:-/tmp/gt-heavy.lock}

PULUMI_VERSION=v3.274.1
# The version the pulumi-kubernetes Go SDK (v4.32.0) asks the engine for.
K8S_PROVIDER_VERSION=4.32.0
KUBE_VERSION=v1.36.3
VCLUSTER_VERSION=v0.36.1

FORCE=0
SET=all
for arg in "$@"; do
	case "$arg" in
	--force) FORCE=1 ;;
	demo | demo-nodes) SET=$arg ;;
	*)
		echo "usage: $0 [--force] [demo|demo-nodes]" >&2
		exit 2
		;;
	esac
done
# wanted TOOL: whether this run builds TOOL; the demo sets are what `make demo` starts, the rest is for `make test`.
wanted() {
	[[ $SET == all ]] && return 0
	case "$1" in
	etcd | kube | pulumi | pulumi-resource-kubernetes | vcluster-chart) return 0 ;;
	containerd | nodeimages) [[ $SET == demo-nodes ]] && return 0 ;;
	esac
	return 1
}

command -v go >/dev/null || {
	echo "build-tools: go is not on PATH" >&2
	exit 1
}
for c in flock sha256sum; do
	command -v "$c" >/dev/null || {
		echo "build-tools: $c is missing (Debian package util-linux / coreutils)" >&2
		exit 1
	}
done
mkdir -p "$BIN" "$STAMPS"
GO_VERSION=$(go env GOVERSION GOOS GOARCH | tr '\n' ' ')

# stamp_of DIR EXTRA...: hash of the module's files (its packages' directories included), the toolchain and the build
# parameters.
stamp_of() {
	local dir=$1
	shift
	{
		echo "$GO_VERSION $*"
		find "$dir" -type f \( -name 'go.mod' -o -name 'go.sum' -o -name '*.go' -o -name '*.json' \) \
			-print0 | sort -z | xargs -0 sha256sum
	} | sha256sum | cut -d' ' -f1
}

up_to_date() { # name stamp outputs...
	local name=$1 stamp=$2
	shift 2
	[[ $FORCE == 0 && -f $STAMPS/$name && "$(cat "$STAMPS/$name")" == "$stamp" ]] || return 1
	local f
	for f in "$@"; do [[ -x $f ]] || return 1; done
}

# timed LABEL CMD...: runs CMD under the heavy-build lock, saying every 30 s that it still runs (scripts/heartbeat.sh),
# and reports wall time and peak RSS.
timed() {
	local label=$1
	shift
	if [[ -x /usr/bin/time ]]; then
		local log
		log=$(mktemp)
		if ! "$ROOT/scripts/heartbeat.sh" -q "$label" flock "$LOCK" /usr/bin/time -v -o "$log" "$@"; then
			cat "$log" >&2
			rm -f "$log"
			return 1
		fi
		printf '  %s: wall %s, peak RSS %s MB\n' "$label" \
			"$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$log")" \
			"$(($(sed -n 's/.*Maximum resident set size (kbytes): //p' "$log") / 1024))"
		rm -f "$log"
	else
		local start=$SECONDS
		"$ROOT/scripts/heartbeat.sh" -q "$label" flock "$LOCK" "$@"
		printf '  %s: wall %ss\n' "$label" "$((SECONDS - start))"
	fi
}

# build NAME MODULE_DIR OUT_DIR LDFLAGS PACKAGE...: go build into a staging dir, then move the
# binaries (named like `go build` names them) into OUT_DIR. Several packages share one build (and
# one stamp); builds in one module share its versions, so their common dependencies compile once.
build() {
	local name=$1 dir=$2 out=$3 ldflags=$4
	shift 4
	local bins=() p
	for p in "$@"; do
		if [[ $p == . ]]; then bins+=("$(basename "$dir")"); else bins+=("$(basename "$p")"); fi
	done
	local stamp
	stamp=$(stamp_of "$dir" "$ldflags" "${GOFLAGS:-}" "${CGO_ENABLED:-}" "$@")
	if up_to_date "$name" "$stamp" "${bins[@]/#/$out/}"; then
		echo "build-tools: $name up to date"
		return
	fi
	echo "build-tools: building $name ($*) ..."
	local tmp
	tmp=$(mktemp -d "$TOOLS/.build.XXXXXX")
	if ! (cd "$dir" && timed "go build $name" go build -ldflags "-s -w $ldflags" -o "$tmp/" "$@"); then
		rm -rf "$tmp"
		return 1
	fi
	mkdir -p "$out"
	for p in "${bins[@]}"; do mv -f "$tmp/$p" "$out/$p"; done
	rm -rf "$tmp"
	echo "$stamp" >"$STAMPS/$name"
}

# module_dir MODULE[@VERSION]: the module's directory in the module cache (downloading it).
# Runs outside any module so go.mod/go.sum are never touched.
module_dir() {
	local dir
	dir=$(cd "${TMPDIR:-/tmp}" && GOWORK=off GOFLAGS='' go mod download -json "$1" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	[[ -n $dir && -d $dir ]] || {
		echo "build-tools: cannot download $1" >&2
		return 1
	}
	echo "$dir"
}

# required_version MODULE_DIR MODULE: the version MODULE_DIR's go.mod selects for MODULE.
required_version() {
	(cd "$1" && go list -m -f '{{.Version}}' "$2")
}

# One module for the local stack's tools (etcd, the pulumi CLI and its YAML host), and one for the kubernetes provider
# (its code needs an older pulumi/pkg than the CLI is), both at the product's versions of every module they share with
# it: each SDK and library compiles once for the tools and the product's tests (tests/build checks the versions).
LS=$MODS/localstack

# The kubernetes provider's generated files, in place before its stamp is taken.
kp=$MODS/pulumi-resource-kubernetes
kp_mod=github.com/pulumi/pulumi-kubernetes/provider/v4
kp_src=$(module_dir "$kp_mod@$(required_version "$kp" "$kp_mod")")/cmd/pulumi-resource-kubernetes
# The upstream generator (generate.go) stamps the version into the schema; do the same, so
# `pulumi package get-schema` reports it. The schema has no top-level "version" key of its own.
schema_tmp=$(mktemp)
{
	printf '{"version":"%s",' "$K8S_PROVIDER_VERSION"
	tail -c +2 "$kp_src/schema.json"
} >"$schema_tmp"
cmp -s "$schema_tmp" "$kp/schema.json" || cp "$schema_tmp" "$kp/schema.json"
rm -f "$schema_tmp"
cmp -s "$kp_src/terraform-mapping.json" "$kp/terraform-mapping.json" ||
	install -m 0644 "$kp_src/terraform-mapping.json" "$kp/terraform-mapping.json"

# --- etcd ------------------------------------------------------------------------------------
wanted etcd && build etcd "$LS" "$BIN" "" ./etcd

# --- kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy ----------------
# The control plane and the real nodes' kubelet and kube-proxy, from the Kubernetes v1.36 module (scripts/tools/k8s-0.36), newer than the product's client
# libraries (v0.34), as a client may be. The same variables k8s.io/kubernetes hack/lib/version.sh sets, so clients
# parse the version.
K8S036=$MODS/k8s-0.36
kube_ldflags=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	minor=${KUBE_VERSION#v1.}
	kube_ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor%%.*}"
	kube_ldflags+=" -X $pkg.gitTreeState=clean"
done
# Static and -trimpath, as every build of this module is: the control plane's binaries also run in the tenants' vCluster
# pods (the kubernetes image, scripts/local-nodes.sh), and one set of flags compiles the Kubernetes libraries once for
# all of them.
K8S036_FLAGS="-trimpath -buildvcs=false"
wanted kube && CGO_ENABLED=0 GOFLAGS=$K8S036_FLAGS build kube "$K8S036" "$BIN" "$kube_ldflags" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy

# --- containerd, its runc shim and ctr -----------------------------------------------------------
# The real nodes' container runtime (scripts/local-cluster.sh), at the version Kubernetes 1.36 pairs with (containerd
# v2.4.2 RELEASES.md, "Kubernetes support"): Debian's 1.6 has no CDI, which device injection needs. Static, without
# the snapshotters that need cgo (btrfs, devmapper, zfs), and with the version variable its Makefile sets.
CONTAINERD_VERSION=$(required_version "$MODS/containerd" github.com/containerd/containerd/v2)
wanted containerd && CGO_ENABLED=0 GOFLAGS="-tags=no_btrfs,no_devmapper,no_zfs" build containerd "$MODS/containerd" "$BIN" \
	"-X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
	github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	github.com/containerd/containerd/v2/cmd/ctr

# --- node images -------------------------------------------------------------------------------
# mkimage packs the images the real nodes run (scripts/tools/nodeimages), from the static binaries built beside it;
# -trimpath and no VCS stamp, so that the images' digests depend on neither where the repository is nor its commit
# (images.lock).
wanted nodeimages && CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" build nodeimages "$MODS/nodeimages" "$TOOLS/nodeimages" "" ./mkimage ./pause ./gpu-probe ./podcheck ./registry

# The tenants' vClusters on the real nodes run images packed from these: vCluster's syncer (the open-source build of
# the release the chart comes from, compiled in the control plane's module so that the Kubernetes libraries compile
# once) and kine, the embedded database's server that vCluster starts from the kubernetes image
# (loft-sh/vcluster v0.36.1 pkg/k8s/k8s.go StartKineWithDone, pkg/constants/constants.go KineBinary), without cgo
# (kine v0.17.5 pkg/drivers/sqlite/sqlite_nocgo.go: modernc.org/sqlite). The syncer's version variable stays "dev",
# which keeps its telemetry off (loft-sh/vcluster v0.36.1 pkg/telemetry/collect_controlplane.go): the nodes reach no
# network outside the machine.
KINE_VERSION=v0.17.5
wanted nodeimages && CGO_ENABLED=0 GOFLAGS=$K8S036_FLAGS build vcluster-syncer "$K8S036" "$TOOLS/nodeimages" \
	"" github.com/loft-sh/vcluster/cmd/vcluster
wanted nodeimages && CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false" build kine "$(module_dir "github.com/k3s-io/kine@$KINE_VERSION")" \
	"$TOOLS/nodeimages" "-X github.com/k3s-io/kine/pkg/version.Version=$KINE_VERSION" github.com/k3s-io/kine
# CoreDNS, each virtual cluster's DNS, at the version vCluster v0.36.1 deploys with Kubernetes 1.36
# (pkg/constants/coredns.go CoreDNSVersionMap), with the plugins of its own plugin.cfg, as its Makefile builds it.
COREDNS_VERSION=v1.14.2
wanted nodeimages && CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false" build coredns \
	"$(module_dir "github.com/coredns/coredns@$COREDNS_VERSION")" "$TOOLS/nodeimages" \
	"-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" github.com/coredns/coredns
# The real nodes' default StorageClass: Rancher's local-path provisioner, run beside the control plane (scripts/
# local-nodes.sh). Its module zip carries vendor/modules.txt without the vendored code (the proxy leaves vendor
# directories out), so the build reads the module's own go.sum instead.
LOCAL_PATH_VERSION=v0.0.30
wanted nodeimages && CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false" build local-path-provisioner \
	"$(module_dir "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION")" "$BIN" "" github.com/rancher/local-path-provisioner
# The real nodes' NetworkPolicy enforcer (scripts/local-nodes.sh): kube-router's policy controller, the release the
# module proxy serves, built from its own module and go.sum with the version variable its Makefile sets.
KUBE_ROUTER_VERSION=v2.1.0
wanted nodeimages && CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false" build kube-router \
	"$(module_dir "github.com/cloudnativelabs/kube-router/v2@$KUBE_ROUTER_VERSION")" "$BIN" \
	"-X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
	github.com/cloudnativelabs/kube-router/v2/cmd/kube-router

# --- pulumi CLI and the YAML language host ----------------------------------------------------
# The Automation API refuses a CLI that does not report its version. pulumi-language-yaml (pulumi-yaml, its own
# version stamped as its Makefile does) lives beside pulumi, where the CLI looks for language plugins; two builds,
# since only the tests run YAML programs. (The Go, Node.js and Python hosts are nested modules of pulumi/pulumi without
# tags, which the module proxy does not serve.)
wanted pulumi && build pulumi "$LS" "$BIN" \
	"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION" \
	github.com/pulumi/pulumi/pkg/v3/cmd/pulumi
wanted pulumi-language-yaml && build pulumi-language-yaml "$LS" "$BIN" \
	"-X github.com/pulumi/pulumi-yaml/pkg/version.Version=$(required_version "$LS" github.com/pulumi/pulumi-yaml)" \
	github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml

# --- pulumi-resource-kubernetes --------------------------------------------------------------
# Built straight into the plugin cache under the version the SDK requests, so the engine never
# tries to download it (offline) and no $PATH lookup is involved.
plugin_dir=$PULUMI_HOME_DIR/plugins/resource-kubernetes-v$K8S_PROVIDER_VERSION
rm -f "$plugin_dir.partial"
build pulumi-resource-kubernetes "$kp" "$plugin_dir" \
	"-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$K8S_PROVIDER_VERSION" .

# --- vCluster chart --------------------------------------------------------------------------
chart=$TOOLS/charts/vcluster
if [[ $FORCE == 1 || ! -f $chart/Chart.yaml || "$(cat "$STAMPS/vcluster-chart" 2>/dev/null)" != "$VCLUSTER_VERSION" ]]; then
	echo "build-tools: copying vCluster chart $VCLUSTER_VERSION ..."
	src=$(module_dir "github.com/loft-sh/vcluster@$VCLUSTER_VERSION")/chart
	rm -rf "$chart"
	mkdir -p "$(dirname "$chart")"
	cp -R "$src" "$chart"
	chmod -R u+w "$chart"
	echo "$VCLUSTER_VERSION" >"$STAMPS/vcluster-chart"
else
	echo "build-tools: vCluster chart up to date"
fi

# --- kube-state-metrics, vcluster-config and promql-eval --------------------------------------
# kube-state-metrics at the release the monitoring component deploys, for the end-to-end alert test, and
# vcluster-config, vCluster's own config loader (loft-sh/vcluster pkg/config) at the release the chart comes from, so
# the unit tests validate the values the program renders as vCluster itself reads them. The module of the control plane,
# as both require k8s.io v0.36, newer than the product's v0.34: the Kubernetes libraries compile once for all of them. Its
# github.com/loft-sh/api/v4 is unknown to the checksum database: go.sum is committed. The version variables are the
# ones kube-state-metrics' own Makefile sets (k8s.io/kube-state-metrics/v2@v2.20.0 Makefile). promql-eval runs the
# alert rules through Prometheus's rule evaluator for the rule tests; its own module, as Prometheus requires k8s.io
# v0.37.
KSM_VERSION=v2.20.0
wanted k8s-0.36 && CGO_ENABLED=0 GOFLAGS=$K8S036_FLAGS build k8s-0.36 "$K8S036" "$BIN" \
	"-X github.com/prometheus/common/version.Version=$KSM_VERSION -X k8s.io/kube-state-metrics/v2/pkg/app.ClientGoVersion=$(required_version "$K8S036" k8s.io/client-go)" \
	./kube-state-metrics ./vcluster-config
wanted promql-eval && build promql-eval "$MODS/promql-eval" "$BIN" "" .

if [[ $SET == demo ]]; then
	echo "build-tools: done (the demo's tools): $BIN"
	exit 0
fi

# build_always NAME DIR PACKAGE: go build of a product package into $BIN/NAME on every run. The `build` helper stamps
# only a module directory's top-level files, and these depend on the product's packages and go.mod; Go's build cache
# makes an unchanged rebuild a few seconds (mostly the link). Staged and moved, so a preview running the old binary is
# never handed a half-written one.
build_always() {
	local name=$1 dir=$2 pkg=$3 tmp
	echo "build-tools: building $name ($pkg) ..."
	tmp=$(mktemp -d "$TOOLS/.build.XXXXXX")
	if ! (cd "$dir" && timed "go build $name" go build -ldflags "-s -w" -o "$tmp/$name" "$pkg"); then
		rm -rf "$tmp"
		exit 1
	fi
	mv -f "$tmp/$name" "$BIN/$name"
	rm -rf "$tmp"
}

# The project's own policy pack (./policy).
build_always gpu-tenancy-policy "$ROOT" ./policy
# The real nodes' simulated NVIDIA DRA kubelet plugin (scripts/sim-dra-plugin, internal/sim/draplugin).
build_always sim-dra-plugin "$ROOT" ./scripts/sim-dra-plugin
# The Platform for programs in other languages (./provider, its own module so the product's stays light), where a
# program's plugins.providers entry finds it.
build_always pulumi-resource-gpu-tenancy "$ROOT/provider" ./cmd/pulumi-resource-gpu-tenancy

echo "build-tools: done: $BIN"
