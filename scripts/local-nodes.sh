# shellcheck shell=bash
# Real nodes for the local control plane, sourced by scripts/local-cluster.sh when GT_NODES names them: each node is a
# kubelet, containerd (built from the module proxy, scripts/tools/containerd) with Debian's runc and CNI plugins,
# kube-proxy and a NetworkPolicy enforcer, in a network namespace and a mount namespace of its own. Pods run, and the node's own changes stay in
# its namespaces:
#   - network: the node's address is a veth into the host bridge $NODE_BRIDGE; its pods sit on a CNI bridge inside its
#     namespace, and the kubelet's, kube-proxy's, portmap's and the enforcer's iptables rules and ipsets are the
#     namespace's, so they go with it;
#   - mounts: the paths the kubelet, containerd and libcni compile in (the kubelet's device-plugin socket,
#     /var/log/containers, /var/lib/cni, the shims' sockets under /run/containerd) are bound to the node's own
#     directory inside its mount namespace, so two nodes never share them and nothing is mounted on the host;
#   - cgroups: the kubelet's pods live under a cgroup root of the node's own name in every v1 hierarchy.
# What does touch the host, and is undone by `down`: the bridge, its veths and routes, the kernel settings the kubelet
# writes at start (kubernetes v1.36.3 pkg/kubelet/cm/container_manager_linux.go setupKernelTunables: put back at once),
# the node cgroups, and the empty mount points created for the compiled-in paths where the host had none.
#
# A GPU pool's node also runs the simulated NVIDIA DRA kubelet plugin (scripts/sim-dra-plugin, internal/sim/draplugin),
# as a part of the node rather than a DaemonSet's pod: it publishes the pool's devices and prepares claims through CDI
# specs in the node's /run/cdi, which containerd reads.
#
# GT_NODES is a space-separated list of pools, one node each: `system` is a node without GPUs or taint (where the
# vCluster control planes run), any other name is a GPU pool of the local stack (stacks/Pulumi.local.yaml), whose
# node carries that pool's labels and taint (components/cluster/gpus.go GPUNodeLabels, GPUTaint).
# The nodes are named <pool>-<index>, e.g. system-0, a100-whole-1.

NODE_BRIDGE=${GT_NODE_BRIDGE:-gtnodes0}
NODE_NET=${GT_NODE_NET:-10.243.0}    # the nodes' network, /24: the host is .1, node i is .(10+i)
POD_NET=${GT_POD_NET:-10.244}        # node i's pods: $POD_NET.i.0/24
NODE_GW=$NODE_NET.1
# A private registry's address on the nodes' network, which the nodes' containerd reaches over plain HTTP.
NODE_REGISTRY=$NODE_GW:${GT_NODE_REGISTRY_PORT:-5000}
NODE_TOOLS=${GT_NODE_TOOLS:-$(dirname "$BIN")/nodeimages}
# /proc/<pid>/exe is a resolved path: compare pids against the resolved directory.
if [[ -d $NODE_TOOLS ]]; then NODE_TOOLS=$(cd "$NODE_TOOLS" && pwd -P); fi
read -r -a NODE_POOLS <<<"${GT_NODES:-}"
# The cluster-wide settings the kubelet writes when it starts, with its values (kubernetes v1.36.3
# pkg/kubelet/cm/container_manager_linux.go setupKernelTunables).
KUBELET_TUNABLES=(vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1
	kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000)
# Paths compiled into the kubelet (device plugins under its root, /var/log/containers), containerd and its shims
# (/run/containerd) and libcni (/var/lib/cni), given to each node in its own mount namespace.
NODE_PRIVATE_PATHS=(/var/lib/kubelet /var/log/containers /var/log/pods /var/lib/cni /run/containerd /var/lib/containerd
	/etc/cni /run/cdi /etc/cdi)
# NetworkPolicy is enforced on each node by kube-router's policy controller alone (no routing, no service proxy: the
# routes and kube-proxy are the node's own), with iptables and ipsets: the CNI bridge plugin enforces nothing, and
# kube-network-policies needs the nft queue statement, which this kernel lacks (CONFIG_NFT_QUEUE). v2.1.0 is the
# release the module proxy serves, with advisories reported against the modules it pins (golang.org/x/net among
# them); it runs only on these nodes, as a reader of the API, never on a cloud's. A GPU pool's node also runs the
# simulated NVIDIA DRA kubelet plugin (internal/sim/draplugin).
NODE_PARTS=(holder containerd kubelet kube-proxy network-policy dra-plugin)
# kube-router's health endpoint: its default port, on every address of the node's own network namespace (it binds
# ":20244"), probed from inside it.
NETWORK_POLICY_HEALTH=127.0.0.1:20244
PAUSE_IMAGE=localhost/gpu-tenancy/pause:local
PROBE_IMAGE=localhost/gpu-tenancy/gpu-probe:local
BUSYBOX_IMAGE=localhost/gpu-tenancy/busybox:local
# Each tenant's vCluster: the open-source syncer of the chart's release, and the kubernetes image its init container
# copies the virtual control plane's binaries from (loft-sh/vcluster v0.36.1 chart/templates/_init-containers.tpl:
# `cp -r /kubernetes/. /binaries/`), the control plane's own v1.36.3 with kine.
VCLUSTER_IMAGE=localhost/gpu-tenancy/vcluster-oss:0.36.1
KUBERNETES_IMAGE=localhost/gpu-tenancy/kubernetes:v1.36.3
# Each virtual cluster's DNS, which its syncer deploys (loft-sh/vcluster v0.36.1 pkg/coredns/template.go).
COREDNS_IMAGE=localhost/gpu-tenancy/coredns:1.14.2

nodes_enabled() { ((${#NODE_POOLS[@]} > 0)); }

node_name() { echo "${NODE_POOLS[$1]}-$1"; }
node_ip() { echo "$NODE_NET.$((10 + $1))"; }
node_dir() { echo "$DATA/nodes/$(node_name "$1")"; }
# node_cgroup NODE: the node's cgroup root, named after the bridge too, so two clusters' nodes never share one.
node_cgroup() { echo "$NODE_BRIDGE-$(node_name "$1")"; }

# node_pid NODE PART: the pid of one part of node NODE if it runs and is that program.
node_pid() {
	pid_of "$(node_name "$1").$2" "$(part_exe "$2")"
}

# part_exe PART: the program a node's part runs.
part_exe() {
	case $1 in
	holder) echo "$NODE_TOOLS/pause" ;;
	dra-plugin) echo "$BIN/sim-dra-plugin" ;;
	network-policy) echo "$BIN/kube-router" ;;
	*) echo "$BIN/$1" ;;
	esac
}

# in_node NODE CMD...: CMD inside node NODE's network and mount namespaces.
in_node() {
	local holder
	holder=$(node_pid "$1" holder) || die "node $(node_name "$1"): its namespaces are gone"
	shift
	nsenter -t "$holder" -n -m -- "$@"
}

nodes_pki() {
	local i name
	[[ -f $PKI/kube-proxy.crt ]] || sign ca kube-proxy "/CN=system:kube-proxy" "$CLIENT_EXT"
	# The enforcer's identity, which nodes_network_policy_rbac lets read what policies are enforced on.
	[[ -f $PKI/network-policy.crt ]] || sign ca network-policy "/CN=$NETWORK_POLICY_USER" "$CLIENT_EXT"
	# The API server's identity towards the kubelets (logs, exec, port-forward), which bootstrap RBAC binds nowhere:
	# system:masters, as kubeadm's apiserver-kubelet-client is bound to system:kubelet-api-admin.
	[[ -f $PKI/apiserver-kubelet-client.crt ]] ||
		sign ca apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$CLIENT_EXT"
	for ((i = 0; i < ${#NODE_POOLS[@]}; i++)); do
		name=$(node_name "$i")
		# The identity the Node authorizer and NodeRestriction expect of this node's kubelet.
		[[ -f $PKI/kubelet-$name.crt ]] || sign ca "kubelet-$name" "/O=system:nodes/CN=system:node:$name" "$CLIENT_EXT"
	done
}

# save_host_settings records what the nodes may change on the host, once, before the first node starts.
save_host_settings() {
	[[ -f $RUN/host-settings ]] && return
	local s
	for s in "${KUBELET_TUNABLES[@]%%=*}"; do echo "$s $(<"/proc/sys/$s")"; done >"$RUN/host-settings.tmp"
	mv "$RUN/host-settings.tmp" "$RUN/host-settings"
}

restore_host_settings() {
	[[ -f $RUN/host-settings ]] || return 0
	local s v
	while read -r s v; do [[ $(<"/proc/sys/$s") == "$v" ]] || echo "$v" >"/proc/sys/$s"; done <"$RUN/host-settings"
}

nodes_network() {
	if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
		log "creating bridge $NODE_BRIDGE $NODE_GW/24"
		# Recorded first: an up interrupted here leaves a bridge that down still removes.
		echo "$NODE_BRIDGE" >"$RUN/bridge"
		ip link add "$NODE_BRIDGE" type bridge
	elif [[ ! -f $RUN/bridge ]]; then
		die "the bridge $NODE_BRIDGE belongs to another local cluster with nodes: stop it first (its purge), or set GT_NODE_BRIDGE, GT_NODE_NET and GT_POD_NET"
	fi
	# Here-strings, not pipes into grep -q: under pipefail, a writer cut short by grep's early exit fails the test.
	grep -q "inet $NODE_GW/" <<<"$(ip addr show dev "$NODE_BRIDGE")" || ip addr add "$NODE_GW/24" dev "$NODE_BRIDGE"
	ip link set "$NODE_BRIDGE" up
}

# write_file FILE: stdin into FILE, only when it differs: kube-proxy exits when its configuration file changes
# ("content of the proxy server's configuration file was updated"), so an up that changes nothing rewrites nothing.
write_file() {
	local tmp=$1.tmp
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv -f "$tmp" "$1"; fi
}

render_node_files() {
	local i=$1 dir name ip
	dir=$(node_dir "$i")
	name=$(node_name "$i")
	ip=$(node_ip "$i")
	mkdir -p "$dir"/{etc,run,logs,state,cni/net.d} "$dir/etc/certs.d/$NODE_REGISTRY"
	local p
	for p in "${NODE_PRIVATE_PATHS[@]}"; do mkdir -p "$dir/root$p"; done
	write_kubeconfig "$dir/kubelet.kubeconfig" "kubelet-$name" "https://$NODE_GW:$APISERVER_PORT"
	write_kubeconfig "$dir/kube-proxy.kubeconfig" kube-proxy "https://$NODE_GW:$APISERVER_PORT"
	write_kubeconfig "$dir/network-policy.kubeconfig" network-policy "https://$NODE_GW:$APISERVER_PORT"
	write_file "$dir/etc/containerd.toml" <<EOF
# containerd for node $name (scripts/local-nodes.sh). Config version 3 (containerd 2.x).
version = 3
root = "$dir/state/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs",
  "io.containerd.differ.v1.erofs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
  "io.containerd.nri.v1.nri"]
# In the node's own /run/containerd (its mount namespace): a socket path holds at most 104 bytes.
[grpc]
  address = "/run/containerd/containerd.sock"
[ttrpc]
  address = "/run/containerd/containerd.sock.ttrpc"
[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "$dir/state/opt"
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = "$PAUSE_IMAGE"
    # Per-registry settings (hosts.toml): the nodes' private registry is served over plain HTTP.
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = "$dir/etc/certs.d"
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    # This host has no CAP_SYS_RESOURCE: an oom_score_adj below containerd's own (the kubelet asks -998 for
    # sandboxes) fails every sandbox; clamp it instead (containerd v2.4.2 docs/cri/config.md).
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = ["/etc/cdi", "/run/cdi"]
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = "$BIN/containerd-shim-runc-v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "$(command -v runc)"
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$dir/cni/net.d"
      max_conf_num = 1
EOF
	# The registry a test may serve on the host's end of the bridge (tests/nodes runs .tools/nodeimages/registry there),
	# over plain HTTP (containerd v2.4.2 docs/hosts.md: an http:// server is dialled without TLS). It asks for
	# credentials, which containerd takes from the pod's pull secret through the kubelet.
	write_file "$dir/etc/certs.d/$NODE_REGISTRY/hosts.toml" <<EOF
server = "http://$NODE_REGISTRY"
[host."http://$NODE_REGISTRY"]
  capabilities = ["pull", "resolve"]
EOF
	write_file "$dir/cni/net.d/10-pods.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_NET.$i.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
	local taints="[]"
	[[ ${NODE_POOLS[$i]} == system ]] || taints="[{key: nvidia.com/gpu, value: present, effect: NoSchedule}]"
	write_file "$dir/etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
# These hosts are cgroup v1, which kubelet 1.35+ refuses unless told.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupRoot: /$(node_cgroup "$i")
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
maxPods: 40
serializeImagePulls: false
# Absolute disk thresholds: the kubelet reads a percentage of the file system's whole size, and a shared build
# disk (hundreds of GB, most of it other jobs' caches) sits below 5% free with gigabytes left, which tainted every
# node DiskPressure and left each pod unscheduled. A node image cannot be pulled again (no registry), so image
# garbage collection is off: 100 disables it (KubeletConfiguration imageGCHighThresholdPercent,
# https://kubernetes.io/docs/reference/config-api/kubelet-config.v1beta1/).
evictionHard: {memory.available: 100Mi, nodefs.available: 1Gi, imagefs.available: 1Gi, nodefs.inodesFree: 1%, imagefs.inodesFree: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# No CAP_SYS_RESOURCE here: the kubelet's own default -999 cannot be applied.
oomScoreAdj: 0
registerWithTaints: $taints
EOF
	write_file "$dir/etc/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$dir/kube-proxy.kubeconfig"}
mode: iptables
hostnameOverride: $name
clusterCIDR: $POD_NET.0.0/16
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$ip/32"]
# Host-wide conntrack settings stay as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
}

# node_labels NODE: the kubelet's --node-labels for a GPU pool's node.
node_labels() {
	[[ ${NODE_POOLS[$1]} == system ]] && return
	echo "--node-labels=gpu-tenancy.io/pool=${NODE_POOLS[$1]},nvidia.com/gpu.present=true"
}

# node_start NODE PART ARGS...: like start, for a part of a node, inside its namespaces.
node_start() {
	local i=$1 part=$2 holder
	shift 2
	holder=$(node_pid "$i" holder) || die "$(node_name "$i").$part: the node's namespaces are gone"
	launch "$(node_name "$i").$part" "$(part_exe "$part")" nsenter -t "$holder" -n -m -- setsid "$@"
}

# node_wait NODE PART WHAT CMD...: await for a part of a node.
node_wait() {
	local i=$1 part=$2 what=$3 name
	shift 3
	name=$(node_name "$i").$part
	await "$name" "$(part_exe "$part")" "$name: $what not reached after ${START_TIMEOUT}s (log $LOGS/$name.log)" "$@"
}

node_up() {
	local i=$1 dir name ip holder p
	dir=$(node_dir "$i")
	name=$(node_name "$i")
	ip=$(node_ip "$i")
	render_node_files "$i"
	# A node whose namespaces were not set up to the end (an interrupted up, a holder that died under its parts) starts
	# again from nothing.
	if ! holder=$(node_pid "$i" holder) || [[ ! -f $RUN/$name.wired ]]; then
		node_down "$i"
		rm -f "$RUN/$name.wired"
		# The namespaces live as long as this process; everything of the node runs inside them.
		crashed_report "$name.holder"
		setsid unshare --net --mount --propagation private "$NODE_TOOLS/pause" </dev/null >>"$LOGS/$name.holder.log" 2>&1 &
		echo $! >"$RUN/$name.holder.pid"
		for ((p = 0; p < 100; p++)); do holder=$(node_pid "$i" holder) && break || sleep 0.05; done
		[[ -n $holder ]] || die "$name: its namespaces did not start"
		for p in "${NODE_PRIVATE_PATHS[@]}"; do
			if [[ ! -e $p ]]; then
				mkdir -p "$p"
				echo "$p" >>"$DATA/host-paths.created"
			fi
			nsenter -t "$holder" -m -- mount --bind "$dir/root$p" "$p"
		done
		local host_end=${NODE_BRIDGE:0:12}v$i
		ip link add "$host_end" type veth peer name eth0 netns "/proc/$holder/ns/net"
		ip link set "$host_end" master "$NODE_BRIDGE" up
		nsenter -t "$holder" -n -- sh -ec "
			ip link set lo up
			ip addr add $ip/24 dev eth0
			ip link set eth0 up
			ip route add default via $NODE_GW
			sysctl -qw net.ipv4.ip_forward=1
		"
		ip route replace "$POD_NET.$i.0/24" via "$ip"
		touch "$RUN/$name.wired"
	fi
	# Routes to every other node's pods, also those of nodes a later up added.
	local j
	for ((j = 0; j < ${#NODE_POOLS[@]}; j++)); do
		((j == i)) && continue
		nsenter -t "$holder" -n -- ip route replace "$POD_NET.$j.0/24" via "$(node_ip "$j")"
	done
	# Every v1 hierarchy gets the node's cgroup root, where its kubelet puts its pods.
	for p in /sys/fs/cgroup/*/; do
		if [[ -f $p/cgroup.procs && $p != */unified/ ]]; then mkdir -p "$p$(node_cgroup "$i")"; fi
	done

	if ! node_pid "$i" containerd >/dev/null; then
		node_start "$i" containerd "$BIN/containerd" --config "$dir/etc/containerd.toml"
	fi
	node_wait "$i" containerd "its socket" in_node "$i" "$BIN/ctr" version
	local image ref digest _
	for image in "$DATA"/images/*.tar; do
		in_node "$i" "$BIN/ctr" -n k8s.io images import "$image" >/dev/null ||
			die "$name: importing $image failed"
	done
	# Each image by its digest too, as a pull by digest leaves it: the charts name the images so on the local stack
	# (stacks/Pulumi.local.yaml), and the runtime looks a digest reference up by that name.
	while read -r ref digest _; do
		in_node "$i" "$BIN/ctr" -n k8s.io images tag --force "$ref" "${ref%:*}@$digest" >/dev/null ||
			die "$name: naming $ref by its digest failed"
	done <"$DATA/images/images.lock"

	local heartbeat=""
	if ! node_pid "$i" kubelet >/dev/null; then
		heartbeat=$(node_heartbeat "$name")
		node_start "$i" kubelet "$BIN/kubelet" --config "$dir/etc/kubelet.yaml" \
			--kubeconfig "$dir/kubelet.kubeconfig" --hostname-override "$name" --node-ip "$ip" $(node_labels "$i") \
			--v=1 $(gates)
	fi
	node_wait "$i" kubelet "healthz" in_node "$i" curl -sf --max-time 2 http://127.0.0.1:10248/healthz
	if [[ -n $heartbeat ]]; then
		# The kubelet writes its kernel settings once, as it starts, after its health endpoint answers: wait for them,
		# then put the host's back at once.
		node_wait "$i" kubelet "its kernel settings" kubelet_tunables_set
		restore_host_settings
	fi
	if ! node_pid "$i" kube-proxy >/dev/null; then
		node_start "$i" kube-proxy "$BIN/kube-proxy" --config "$dir/etc/kube-proxy.yaml" $(gates)
	fi
	node_wait "$i" kube-proxy "healthz" in_node "$i" curl -sf --max-time 2 http://127.0.0.1:10256/healthz
	# Ready as this kubelet reports it: a heartbeat newer than the last one before it started.
	node_wait "$i" kubelet "node Ready" node_ready "$name" "$heartbeat"
	# The enforcer exits unless its Node exists (kube-router v2.1.0 pkg/controllers/netpol/network_policy_controller.go
	# NewNetworkPolicyController), and filters traffic between pods of one node only where the bridge hands it to
	# iptables (its physdev rules, pkg/controllers/netpol/pod.go), which its routing controller, off here, would turn on.
	[[ $(in_node "$i" cat /proc/sys/net/bridge/bridge-nf-call-iptables) == 1 ]] ||
		die "$name: net.bridge.bridge-nf-call-iptables is not 1 in the node's namespace: NetworkPolicy would not hold between pods of one node"
	if ! node_pid "$i" network-policy >/dev/null; then
		node_start "$i" network-policy "$BIN/kube-router" --run-firewall=true --run-router=false \
			--run-service-proxy=false --enable-cni=false --enable-ipv6=false --hostname-override "$name" \
			--kubeconfig "$dir/network-policy.kubeconfig" --service-cluster-ip-range "$SERVICE_CIDR" \
			--health-port "${NETWORK_POLICY_HEALTH##*:}" --metrics-port 0
	fi
	node_wait "$i" network-policy "healthz" in_node "$i" curl -sf --max-time 2 "http://$NETWORK_POLICY_HEALTH/healthz"
	[[ ${NODE_POOLS[$i]} == system ]] && return
	# The plugin acts as the node (the Node authorizer lets a node publish its own ResourceSlices and read the claims
	# of its pods), as the NVIDIA driver's plugin acts for its node with a service account.
	if ! node_pid "$i" dra-plugin >/dev/null; then
		node_start "$i" dra-plugin "$BIN/sim-dra-plugin" -node "$name" -pool "${NODE_POOLS[$i]}" \
			-kubeconfig "$dir/kubelet.kubeconfig" -cdi-dir /run/cdi -dev-dir "$dir/dev"
	fi
	node_wait "$i" dra-plugin "its ResourceSlice" node_has_slice "$name"
}

node_has_slice() {
	local slices
	slices=$(curl -sf --max-time 2 "${ADMIN_CURL[@]}" \
		"https://$NODE_GW:$APISERVER_PORT/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName=$1") || return 1
	grep -q '"driver": "gpu.nvidia.com"' <<<"$slices"
}

# node_ready NAME [HEARTBEAT]: the node's Ready condition is True, with a heartbeat other than HEARTBEAT if given.
node_ready() {
	local ready
	ready=$(curl -sf --max-time 2 "${ADMIN_CURL[@]}" "https://$NODE_GW:$APISERVER_PORT/api/v1/nodes/$1") || return 1
	ready=$(grep -A2 '"type": "Ready"' <<<"$ready")
	grep -q '"status": "True"' <<<"$ready" || return 1
	[[ -z ${2:-} ]] || ! grep -qF "$2" <<<"$ready"
}

# node_heartbeat NAME: the last heartbeat of the node's Ready condition, "none" for a node not registered.
node_heartbeat() {
	local node
	node=$(curl -sf --max-time 2 "${ADMIN_CURL[@]}" "https://$NODE_GW:$APISERVER_PORT/api/v1/nodes/$1") || { echo none; return; }
	grep -A2 '"type": "Ready"' <<<"$node" | sed -n 's/.*"lastHeartbeatTime": \("[^"]*"\).*/\1/p' | grep . || echo none
}

kubelet_tunables_set() {
	local t
	for t in "${KUBELET_TUNABLES[@]}"; do [[ $(<"/proc/sys/${t%%=*}") == "${t#*=}" ]] || return 1; done
}

# nodes_images packs the images every node holds, and prints each one's reference, digest and sources (the lines of
# scripts/tools/nodeimages/images.lock): the pod sandbox, the GPU probe and a shell for tests (Debian's static
# busybox, where a workload needs a shell, with podcheck beside it). The same sources give the same digests.
nodes_images() {
	mkdir -p "$DATA/images"
	local go busybox out
	# The toolchain that built the binaries, as they record it.
	go=$(go version "$NODE_TOOLS/pause" | awk '{print $NF}')
	busybox=$(dpkg-query -W -f '${Version}' busybox-static)
	out=$("$NODE_TOOLS/mkimage" -o "$DATA/images/pause.tar" -ref "$PAUSE_IMAGE" -entrypoint /pause /pause="$NODE_TOOLS/pause")
	echo "$out nodeimages/pause@$go"
	out=$("$NODE_TOOLS/mkimage" -o "$DATA/images/gpu-probe.tar" -ref "$PROBE_IMAGE" -entrypoint /gpu-probe -user 65532 \
		/gpu-probe="$NODE_TOOLS/gpu-probe")
	echo "$out nodeimages/gpu-probe@$go"
	local links=() a
	for a in sh cat ls wget nc sleep echo id env ip hostname grep httpd; do links+=("/bin/$a=@busybox"); done
	out=$("$NODE_TOOLS/mkimage" -o "$DATA/images/busybox.tar" -ref "$BUSYBOX_IMAGE" -entrypoint /bin/sh -user 65532 \
		/bin/busybox=/bin/busybox /bin/podcheck="$NODE_TOOLS/podcheck" "${links[@]}")
	echo "$out debian:busybox-static=$busybox+nodeimages/podcheck@$go"
	out=$("$NODE_TOOLS/mkimage" -o "$DATA/images/vcluster.tar" -ref "$VCLUSTER_IMAGE" -entrypoint "/vcluster start" \
		/vcluster="$NODE_TOOLS/vcluster")
	echo "$out $(go_module_of "$NODE_TOOLS/vcluster")@$go"
	out=$("$NODE_TOOLS/mkimage" -o "$DATA/images/kubernetes.tar" -ref "$KUBERNETES_IMAGE" \
		/bin/busybox=/bin/busybox /bin/cp=@busybox /bin/sh=@busybox \
		/kubernetes/kube-apiserver="$BIN/kube-apiserver" /kubernetes/kube-controller-manager="$BIN/kube-controller-manager" \
		/kubernetes/kine="$NODE_TOOLS/kine")
	# kine is built as its own main module, which records no version: its version flag says it.
	echo "$out debian:busybox-static=$busybox+$(go_module_of "$BIN/kube-apiserver")+github.com/k3s-io/kine@$("$NODE_TOOLS/kine" --version | awk '{print $3}')@$go"
	out=$("$NODE_TOOLS/mkimage" -o "$DATA/images/coredns.tar" -ref "$COREDNS_IMAGE" -entrypoint /coredns -user 65532 \
		/coredns="$NODE_TOOLS/coredns")
	echo "$out github.com/coredns/coredns@$("$NODE_TOOLS/coredns" -version | awk -F- 'NR == 1 {print "v" $2}')@$go"
}

# go_module_of BINARY: the module and version a Go binary was built from, as it records them.
go_module_of() {
	go version -m "$1" | awk '$1 == "mod" {print $2 "@" $3; exit}'
}

# The commands the nodes need, as need_packages takes them.
NODE_PACKAGES=(nsenter:util-linux ip:iproute2 runc:runc iptables:iptables conntrack:conntrack ipset:ipset
	/usr/lib/cni/bridge:containernetworking-plugins /bin/busybox:busybox-static)

# The free space nodes_up asks for: the images (about 150 MiB a node), the containers' writable layers and the
# volumes tests write, above the kubelet's 1Gi threshold.
NODES_MIN_FREE_KIB=$((3 * 1024 * 1024))

nodes_up() {
	need_packages "${NODE_PACKAGES[@]}"
	[[ -x $NODE_TOOLS/pause && -x $NODE_TOOLS/mkimage && -x $BIN/containerd && -x $BIN/kubelet && -x $BIN/sim-dra-plugin &&
		-x $BIN/kube-router ]] ||
		die "the nodes' tools are missing: run scripts/build-tools.sh first"
	[[ -f /sys/fs/cgroup/pids/cgroup.procs ]] ||
		die "real nodes need cgroup v1 hierarchies (/sys/fs/cgroup/pids): this host's cgroups are not what scripts/local-nodes.sh was written for"
	mkdir -p "$DATA/images"
	# Each node's images and containers live under $DATA; below the kubelet's 1Gi eviction threshold (render_node_files)
	# every node would register tainted DiskPressure, and no pod would ever be scheduled.
	local free_kib
	free_kib=$(df --output=avail -k "$DATA" | tail -n 1)
	((free_kib >= NODES_MIN_FREE_KIB)) ||
		die "real nodes need $((NODES_MIN_FREE_KIB / 1024 / 1024)) GiB free where $DATA lies; $((free_kib / 1024)) MiB are: free some space (old build caches, finished test directories) and start again"
	save_host_settings
	nodes_images >"$DATA/images/images.lock"
	nodes_network_policy_rbac
	local i
	for ((i = 0; i < ${#NODE_POOLS[@]}; i++)); do node_up "$i"; done
	restore_host_settings
	# The machine reaches Services' cluster IPs through the first node's kube-proxy, as a client on the cluster's
	# network does: a tenant's kubeconfig names its vCluster's Service (vcluster.kubeconfigServer https://{serviceIP}).
	ip route replace "$SERVICE_CIDR" via "$(node_ip 0)" dev "$NODE_BRIDGE"
	nodes_storage
}

# --- NetworkPolicy ---------------------------------------------------------------------------------------------
NETWORK_POLICY_USER=gpu-tenancy:local-network-policy

# nodes_network_policy_rbac lets the enforcer read what it watches (kube-router v2.1.0 pkg/cmd/kube-router.go starts
# informers on Services, Endpoints, EndpointSlices, Pods, Nodes, Namespaces and NetworkPolicies, whichever controllers
# run), as its own manifests grant (daemonset/generic-kuberouter-all-features.yaml, ClusterRole kube-router).
nodes_network_policy_rbac() {
	local name=$NETWORK_POLICY_USER
	api_ensure /apis/rbac.authorization.k8s.io/v1/clusterroles "$name" "{\"metadata\":{\"name\":\"$name\"},\"rules\":[
{\"apiGroups\":[\"\"],\"resources\":[\"namespaces\",\"pods\",\"services\",\"nodes\",\"endpoints\"],\"verbs\":[\"get\",\"list\",\"watch\"]},
{\"apiGroups\":[\"networking.k8s.io\"],\"resources\":[\"networkpolicies\"],\"verbs\":[\"get\",\"list\",\"watch\"]},
{\"apiGroups\":[\"discovery.k8s.io\"],\"resources\":[\"endpointslices\"],\"verbs\":[\"get\",\"list\",\"watch\"]}]}"
	api_ensure /apis/rbac.authorization.k8s.io/v1/clusterrolebindings "$name" "{\"metadata\":{\"name\":\"$name\"},
\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"$name\"},
\"subjects\":[{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"User\",\"name\":\"$name\"}]}"
}

# --- the nodes' default StorageClass -----------------------------------------------------------------------------
# Rancher's local-path provisioner (v0.0.30, built by scripts/build-tools.sh) runs beside the control plane, as the
# cluster's own part, not as a pod: it provisions each claim of StorageClass local-path, the default, as a directory
# of $DATA/volumes on the node the claim's first pod is placed on (WaitForFirstConsumer), created and removed by a
# helper pod of the busybox image on that node (mode 0777, so that pods running as any user, vCluster's under
# restricted Pod Security among them, write to it). Its objects follow its own manifest
# (github.com/rancher/local-path-provisioner@v0.0.30 deploy/local-path-storage.yaml), the helper pod as root, which
# the busybox image is not by default. The volumes live in the cluster's directory: `purge` deletes them.
STORAGE_NAMESPACE=local-path-storage
STORAGE_CLASS=local-path
STORAGE_PROVISIONER=rancher.io/local-path

# api_ensure PATH NAME JSON: creates the object at the API path unless it exists.
api_ensure() {
	local url=https://$NODE_GW:$APISERVER_PORT$1
	curl -sf --max-time 5 "${ADMIN_CURL[@]}" "$url/$2" >/dev/null && return
	curl -sf --max-time 5 "${ADMIN_CURL[@]}" -X POST -H 'Content-Type: application/json' --data-binary "$3" "$url" >/dev/null ||
		die "creating $1/$2 failed"
}

# json_string TEXT: TEXT as a JSON string.
json_string() {
	local t=$1
	t=${t//\\/\\\\}
	t=${t//\"/\\\"}
	t=${t//$'\n'/\\n}
	t=${t//$'\t'/\\t}
	printf '"%s"' "$t"
}

nodes_storage() {
	mkdir -p "$DATA/volumes"
	local ns=$STORAGE_NAMESPACE sa=local-path-provisioner-service-account
	api_ensure /api/v1/namespaces "$ns" "{\"metadata\":{\"name\":\"$ns\"}}"
	api_ensure "/api/v1/namespaces/$ns/serviceaccounts" "$sa" \
		"{\"metadata\":{\"name\":\"$sa\"},\"automountServiceAccountToken\":false}"
	local config setup teardown helper
	config="{\"nodePathMap\":[{\"node\":\"DEFAULT_PATH_FOR_NON_LISTED_NODES\",\"paths\":[\"$DATA/volumes\"]}]}"
	setup=$'#!/bin/sh\nset -eu\nmkdir -m 0777 -p "$VOL_DIR"\n'
	teardown=$'#!/bin/sh\nset -eu\nrm -rf "$VOL_DIR"\n'
	helper="apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
spec:
  automountServiceAccountToken: false
  securityContext:
    runAsUser: 0
  containers:
  - name: helper-pod
    image: $BUSYBOX_IMAGE
    imagePullPolicy: Never
"
	api_ensure "/api/v1/namespaces/$ns/configmaps" local-path-config \
		"{\"metadata\":{\"name\":\"local-path-config\"},\"data\":{\"config.json\":$(json_string "$config"),\"setup\":$(json_string "$setup"),\"teardown\":$(json_string "$teardown"),\"helperPod.yaml\":$(json_string "$helper")}}"
	api_ensure /apis/storage.k8s.io/v1/storageclasses "$STORAGE_CLASS" \
		"{\"metadata\":{\"name\":\"$STORAGE_CLASS\",\"annotations\":{\"storageclass.kubernetes.io/is-default-class\":\"true\"}},\"provisioner\":\"$STORAGE_PROVISIONER\",\"volumeBindingMode\":\"WaitForFirstConsumer\",\"reclaimPolicy\":\"Delete\"}"
	if ! pid_of local-path-provisioner >/dev/null; then
		start local-path-provisioner --debug start --kubeconfig "$KUBECONFIG_FILE" --namespace "$ns" \
			--configmap-name local-path-config --service-account-name "$sa" --provisioner-name "$STORAGE_PROVISIONER" \
			--helper-image "$BUSYBOX_IMAGE"
	fi
	await local-path-provisioner "$BIN/local-path-provisioner" "local-path-provisioner did not start" \
		grep -q "Provisioner started\|Starting provisioner controller" "$LOGS/local-path-provisioner.log"
}

# node_parts NODE: the parts node NODE runs.
node_parts() {
	if [[ ${NODE_POOLS[$1]} == system ]]; then echo "${NODE_PARTS[@]:0:5}"; else echo "${NODE_PARTS[@]}"; fi
}

# node_processes NODE: every process of node NODE: in its network namespace (its parts, the shims, host-network
# containers) or in its cgroup (every container).
node_processes() {
	local i=$1 holder netns name p
	name=$(node_name "$i")
	if holder=$(node_pid "$i" holder); then
		netns=$(readlink "/proc/$holder/ns/net")
		for p in /proc/[0-9]*; do
			[[ $(readlink "$p/ns/net" 2>/dev/null) == "$netns" ]] && echo "${p#/proc/}"
		done
	fi
	local cg
	cg=/sys/fs/cgroup/pids/$(node_cgroup "$i")
	if [[ -d $cg ]]; then find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null || true; fi
}

node_down() {
	local i=$1 name part pid pids n p
	name=$(node_name "$i")
	# Every part but the holder, the last started first.
	for ((p = ${#NODE_PARTS[@]} - 1; p > 0; p--)); do
		part=${NODE_PARTS[p]}
		if pid=$(node_pid "$i" "$part"); then
			log "stopping $name.$part (pid $pid)"
			signal_and_wait TERM "$pid" 10 || signal_and_wait KILL "$pid" 5 || true
		fi
		rm -f "$RUN/$name.$part.pid"
	done
	# The shims and the containers: nothing else of the node may outlive it.
	for ((n = 0; n < 40; n++)); do
		mapfile -t pids < <(node_processes "$i" | sort -u)
		local others=()
		for pid in "${pids[@]}"; do [[ $pid == "$(node_pid "$i" holder 2>/dev/null)" ]] || others+=("$pid"); done
		((${#others[@]} == 0)) && break
		kill -KILL "${others[@]}" 2>/dev/null || true
		sleep 0.25
	done
	# Last, the holder: its namespaces go with it, and with them every mount, pod network namespace, veth and
	# iptables rule of the node.
	if pid=$(node_pid "$i" holder); then
		signal_and_wait KILL "$pid" 5 || die "$name: its holder (pid $pid) survived SIGKILL"
	fi
	rm -f "$RUN/$name.holder.pid"
	# The kernel frees a dead namespace's devices when it gets to it; the host end of the node's veth goes now.
	ip link del "${NODE_BRIDGE:0:12}v$i" 2>/dev/null || true
	local d
	for d in /sys/fs/cgroup/*/"$(node_cgroup "$i")"; do
		if [[ -d $d ]]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || log "$name: cgroup $d not removed"; fi
	done
	rm -f "$RUN/$name.wired"
}

# nodes_down stops every part of the nodes the last up started, whatever GT_NODES says now, and the provisioner first.
nodes_down() {
	local i f
	stop local-path-provisioner
	local part
	for f in "$RUN"/*.pid; do
		part=${f##*/}
		part=${part#*.}
		part=${part%.pid}
		[[ -f $f && " ${NODE_PARTS[*]} " == *" $part "* ]] || continue
		local name=${f##*/}
		name=${name%%.*}
		local pool=${name%-*} idx=${name##*-}
		NODE_POOLS[idx]=$pool
	done
	for i in "${!NODE_POOLS[@]}"; do node_down "$i"; done
	true
}

# nodes_release_host takes back what the nodes changed on the host, once the API server, which listens on the
# bridge, has stopped.
nodes_release_host() {
	local f
	if [[ -f $RUN/bridge ]]; then
		log "removing bridge $(<"$RUN/bridge")"
		ip link del "$(<"$RUN/bridge")" 2>/dev/null || true
		rm -f "$RUN/bridge"
	fi
	restore_host_settings
	rm -f "$RUN/host-settings"
	if [[ -f $DATA/host-paths.created ]]; then
		while read -r f; do rmdir "$f" 2>/dev/null || true; done < <(sort -r "$DATA/host-paths.created")
		rm -f "$DATA/host-paths.created"
	fi
}

# part_status NAME PID: one line of status for a part, its log's last lines when it died; false unless it runs.
part_status() {
	if [[ -n $2 ]]; then
		printf '%-24s running  pid %-7s\n' "$1" "$2"
	elif [[ -f $RUN/$1.pid ]]; then
		printf '%-24s CRASHED\n' "$1"
		crashed_report "$1" 2>&1
		return 1
	else
		printf '%-24s stopped\n' "$1"
		return 1
	fi
}

nodes_status() {
	local i part rc=0 name
	for ((i = 0; i < ${#NODE_POOLS[@]}; i++)); do
		name=$(node_name "$i")
		for part in $(node_parts "$i"); do
			part_status "$name.$part" "$(node_pid "$i" "$part")" || rc=1
		done
		if node_ready "$name"; then printf '%-24s Ready\n' "$name"; else printf '%-24s NOT Ready\n' "$name" && rc=1; fi
	done
	part_status local-path-provisioner "$(pid_of local-path-provisioner)" || rc=1
	return $rc
}
