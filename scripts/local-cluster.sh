#!/usr/bin/env bash
# A local Kubernetes control plane for end-to-end tests: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler from .tools/bin (scripts/build-tools.sh), all on
# loopback. Without GT_NODES there is no kubelet: pods are scheduled and DRA claims allocated, nothing runs. With
# GT_NODES, real nodes (kubelet, containerd, kube-proxy) join it and pods run (scripts/local-nodes.sh); the API server
# then listens on the nodes' bridge instead of loopback, and the kubeconfig says so.
#
#   scripts/local-cluster.sh up       start what is not running (harmless when all is up)
#   scripts/local-cluster.sh down     stop the recorded processes, by pid
#   scripts/local-cluster.sh status   report each component; exit 1 unless all are up
#   scripts/local-cluster.sh purge    down, then delete the data directory (fresh etcd and certs)
#   scripts/local-cluster.sh images   pack the real nodes' images and print their digests (images.lock's lines)
#   scripts/local-cluster.sh packages install the Debian packages the control plane and the nodes need (root)
#
# Admin kubeconfig: $GT_CLUSTER_DIR/kubeconfig (default .tools/local-cluster/kubeconfig). The scheduler runs as
# system:kube-scheduler and the controller-manager as system:kube-controller-manager with a service account per
# controller (--use-service-account-credentials), the identities real clusters use and RBAC's bootstrap roles serve.
# Logs: $GT_CLUSTER_DIR/logs/<component>.log; pids: $GT_CLUSTER_DIR/run/<component>.pid.
#
# Environment (defaults in brackets):
#   GT_CLUSTER_DIR        data directory [<repo>/.tools/local-cluster]
#   GT_TOOLS_BIN          where the binaries are [<repo>/.tools/bin]
#   GT_ETCD_PORT          etcd client port [23790]
#   GT_ETCD_PEER_PORT     etcd peer port [23800]
#   GT_APISERVER_PORT     kube-apiserver port [26443]
#   GT_KCM_PORT           kube-controller-manager health port [20257]
#   GT_SCHEDULER_PORT     kube-scheduler health port [20259]
#   GT_FEATURE_GATES      extra --feature-gates for every component, e.g. DRAExtendedResource=true
#   GT_APISERVER_ARGS     extra kube-apiserver flags, split on spaces (the benchmark lowers its concurrency limits)
#   GT_START_TIMEOUT      seconds to wait for each component to become ready [60]
#   GT_NODES              real nodes, one per pool named, e.g. "system a100-whole a100-mig" (scripts/local-nodes.sh);
#                         they need root. Two clusters with nodes on one machine need their own GT_NODE_BRIDGE,
#                         GT_NODE_NET, GT_POD_NET and GT_SERVICE_CIDR (the host routes each to its nodes).
#   GT_SERVICE_CIDR       the Services' cluster IPs [10.0.0.0/16]: every tenant's Services take one, the largest bench's
#                         1,000 tenants at their default quota (20) included (docs/benchmarks.md)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
DATA=${GT_CLUSTER_DIR:-$ROOT/.tools/local-cluster}
BIN=${GT_TOOLS_BIN:-$ROOT/.tools/bin}
# /proc/<pid>/exe is a resolved path: compare pids against the resolved directory.
if [[ -d $BIN ]]; then BIN=$(cd "$BIN" && pwd -P); fi
ETCD_PORT=${GT_ETCD_PORT:-23790}
ETCD_PEER_PORT=${GT_ETCD_PEER_PORT:-23800}
APISERVER_PORT=${GT_APISERVER_PORT:-26443}
KCM_PORT=${GT_KCM_PORT:-20257}
SCHEDULER_PORT=${GT_SCHEDULER_PORT:-20259}
FEATURE_GATES=${GT_FEATURE_GATES:-}
read -r -a APISERVER_ARGS <<<"${GT_APISERVER_ARGS:-}"
START_TIMEOUT=${GT_START_TIMEOUT:-60}

# A listening port inside the kernel's ephemeral range can be taken by any outgoing connection between runs (the
# test suites' shards open thousands): the component then fails to bind, at random. Refuse such a port up front,
# naming its variable. https://www.kernel.org/doc/html/latest/networking/ip-sysctl.html (ip_local_port_range)
check_ports() {
	local range=/proc/sys/net/ipv4/ip_local_port_range low high var
	[[ -r $range ]] || return 0
	read -r low high <"$range"
	for var in GT_ETCD_PORT:$ETCD_PORT GT_ETCD_PEER_PORT:$ETCD_PEER_PORT GT_APISERVER_PORT:$APISERVER_PORT \
		GT_KCM_PORT:$KCM_PORT GT_SCHEDULER_PORT:$SCHEDULER_PORT; do
		if ((${var#*:} >= low && ${var#*:} <= high)); then
			echo "local-cluster: ${var%%:*}=${var#*:} lies in the ephemeral port range $low-$high ($range), where an outgoing connection can take it; choose a port below $low or above $high" >&2
			return 1
		fi
	done
}

PKI=$DATA/pki
RUN=$DATA/run
LOGS=$DATA/logs
KUBECONFIG_FILE=$DATA/kubeconfig
# Services' cluster IPs: a /24 (or wider) whose first address is the kubernetes Service's.
SERVICE_CIDR=${GT_SERVICE_CIDR:-10.0.0.0/16}
SERVICE_IP=${SERVICE_CIDR%.*/*}.1
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler)
# shellcheck source=scripts/local-nodes.sh
source "$ROOT/scripts/local-nodes.sh"
# Where the API server listens: loopback, or the nodes' bridge, which the pods reach.
API_HOST=127.0.0.1
if nodes_enabled; then
	API_HOST=$NODE_GW
elif [[ -f $RUN/api-host ]]; then
	# A running control plane started with nodes, read by a command without GT_NODES.
	API_HOST=$(<"$RUN/api-host")
fi

log() { echo "local-cluster: $*"; }
die() {
	echo "local-cluster: $*" >&2
	exit 1
}

# need_packages CMD:PACKAGE...: installs the Debian packages of missing commands (root only). It writes to stderr
# only: the images verb's standard output is the lock file's lines.
need_packages() {
	local missing=() pair
	for pair in "$@"; do command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}"); done
	((${#missing[@]} == 0)) && return
	if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
		die "missing commands; install the Debian packages: ${missing[*]}"
	fi
	log "installing ${missing[*]} ..." >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
		{ apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
}

# The commands the control plane needs, as need_packages takes them.
CONTROL_PLANE_PACKAGES=(openssl:openssl curl:curl setsid:util-linux)

# --- certificates ----------------------------------------------------------------------------

# new_ca NAME CN: a self-signed CA.
new_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.crt" -days 3650 \
		-subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
}

# sign CA NAME SUBJECT EXTENSIONS: a key and a certificate signed by CA.
sign() {
	local ca=$1 name=$2 subj=$3 ext=$4
	openssl req -new -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj" 2>/dev/null
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
		-CAserial "$PKI/$ca.srl" -days 3650 -out "$PKI/$name.crt" -extfile <(printf '%b' "$ext") 2>/dev/null
	rm -f "$PKI/$name.csr"
}

CLIENT_EXT="extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment"

# ensure_pki creates whatever is missing, so data directories from older versions of this script
# gain new files without losing the CA that running clients trust.
ensure_pki() {
	install -d -m 0700 "$PKI"
	[[ -f $PKI/ca.crt ]] || { log "generating certificates in $PKI"; new_ca ca gpu-tenancy-local-ca; }
	[[ -f $PKI/apiserver.crt ]] || sign ca apiserver "/CN=kube-apiserver" \
		"subjectAltName=IP:127.0.0.1,IP:$SERVICE_IP,IP:$NODE_GW,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment"
	# system:masters: tests and the demo need cluster-admin.
	[[ -f $PKI/admin.crt ]] || sign ca admin "/O=system:masters/CN=gpu-tenancy-admin" "$CLIENT_EXT"
	# The components' own users, bound to their roles by RBAC's bootstrap policy (kubernetes v1.34.4
	# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go).
	[[ -f $PKI/kube-scheduler.crt ]] || sign ca kube-scheduler "/CN=system:kube-scheduler" "$CLIENT_EXT"
	[[ -f $PKI/kube-controller-manager.crt ]] || sign ca kube-controller-manager "/CN=system:kube-controller-manager" "$CLIENT_EXT"
	# The aggregation layer's front proxy; without it every component logs a missing
	# requestheader CA on each resync.
	[[ -f $PKI/front-proxy-ca.crt ]] || new_ca front-proxy-ca gpu-tenancy-local-front-proxy-ca
	[[ -f $PKI/front-proxy-client.crt ]] || sign front-proxy-ca front-proxy-client "/CN=front-proxy-client" "$CLIENT_EXT"
	# One RSA key signs (apiserver, controller-manager) and verifies service-account tokens.
	nodes_enabled && ! grep -q "IP Address:$NODE_GW\b" <<<"$(openssl x509 -in "$PKI/apiserver.crt" -noout -ext subjectAltName)" &&
		die "$PKI/apiserver.crt does not name the nodes' bridge $NODE_GW: purge this data directory (make demo-down, or $0 purge)"
	nodes_enabled && nodes_pki
	if [[ ! -f $PKI/sa.pub ]]; then
		openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
		openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	fi
}

# write_kubeconfig FILE CERT [SERVER]: a kubeconfig for the user of $PKI/CERT.{crt,key}.
write_kubeconfig() {
	local file=$1 cert=$2 server=${3:-https://$API_HOST:$APISERVER_PORT}
	local tmp=$file.tmp
	cat >"$tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: gpu-tenancy-local
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$cert.crt")
    client-key-data: $(base64 -w0 <"$PKI/$cert.key")
contexts:
- name: gpu-tenancy-local
  context:
    cluster: gpu-tenancy-local
    user: $cert
current-context: gpu-tenancy-local
EOF
	chmod 0600 "$tmp"
	mv -f "$tmp" "$file"
}

# --- processes -------------------------------------------------------------------------------

pid_of() { # pid_of NAME [EXE]: the recorded pid of NAME if that process is alive and runs EXE [$BIN/NAME]
	local f=$RUN/$1.pid pid exe want=${2:-$BIN/$1}
	[[ -f $f ]] || return 1
	pid=$(<"$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	exe=$(readlink "/proc/$pid/exe" 2>/dev/null) || return 1
	# A recycled pid belongs to another program: never report (or signal) it.
	[[ ${exe% (deleted)} == "$want" ]] || return 1
	echo "$pid"
}

crashed_report() { # a pid file without its process: the component died; show why
	local c=$1
	[[ -f $RUN/$c.pid ]] || return 0
	echo "local-cluster: $c (pid $(<"$RUN/$c.pid")) is not running; last lines of $LOGS/$c.log:" >&2
	tail -n 20 "$LOGS/$c.log" 2>/dev/null | sed 's/^/    /' >&2 || true
}

# launch NAME EXE CMD...: CMD detached from this script, output to NAME's log, its pid recorded; EXE is the program CMD
# execs in the end (pid_of checks it). Control-plane components and the nodes' parts start here.
launch() {
	local name=$1 exe=$2 i
	shift 2
	crashed_report "$name"
	log "starting $name"
	echo "=== $(date -u +%FT%TZ) starting $name" >>"$LOGS/$name.log"
	"$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
	echo $! >"$RUN/$name.pid"
	# setsid (and nsenter) exec in place (this background job is not a group leader); wait for the exec.
	for ((i = 0; i < 100; i++)); do
		pid_of "$name" "$exe" >/dev/null && return
		sleep 0.05
	done
}

start() { # start COMPONENT ARGS...: in a session of its own
	local c=$1
	shift
	[[ -x $BIN/$c ]] || die "$BIN/$c not found: run scripts/build-tools.sh first"
	launch "$c" "$BIN/$c" setsid "$BIN/$c" "$@"
}

# await NAME EXE TIMEOUT_MESSAGE CMD...: polls CMD until it succeeds; when NAME's process (running EXE) exits or
# START_TIMEOUT passes, stops the start, naming it, with its log's last lines.
await() {
	local name=$1 exe=$2 message=$3 deadline=$((SECONDS + START_TIMEOUT))
	shift 3
	until "$@" >/dev/null 2>&1; do
		if ! pid_of "$name" "$exe" >/dev/null; then
			crashed_report "$name"
			die "$name exited during start-up"
		fi
		((SECONDS < deadline)) || {
			tail -n 20 "$LOGS/$name.log" | sed 's/^/    /' >&2
			die "$message"
		}
		sleep 0.3
	done
}

# wait_ready COMPONENT: polls its health endpoint until it answers.
wait_ready() {
	await "$1" "$BIN/$1" "$1 not ready at $(health_url "$1") after ${START_TIMEOUT}s" healthy "$1"
}

ADMIN_CURL=(--cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key")

health_url() {
	case $1 in
	etcd) echo "http://127.0.0.1:$ETCD_PORT/health" ;;
	kube-apiserver) echo "https://$API_HOST:$APISERVER_PORT/readyz" ;;
	kube-controller-manager) echo "https://127.0.0.1:$KCM_PORT/healthz" ;;
	kube-scheduler) echo "https://127.0.0.1:$SCHEDULER_PORT/healthz" ;;
	esac
}

healthy() { # healthy COMPONENT: one probe of its health endpoint
	local url
	url=$(health_url "$1")
	case $1 in
	etcd) grep -q '"health":"true"' <<<"$(curl -sf --max-time 2 "$url")" ;;
	kube-apiserver) [[ $(curl -sf --max-time 2 "${ADMIN_CURL[@]}" "$url") == ok ]] ;;
	*) [[ $(curl -sfk --max-time 2 "$url") == ok ]] ;;
	esac
}

gates() { [[ -z $FEATURE_GATES ]] || echo "--feature-gates=$FEATURE_GATES"; }

up() {
	check_ports
	need_packages "${CONTROL_PLANE_PACKAGES[@]}"
	mkdir -p "$RUN" "$LOGS"
	install -d -m 0700 "$DATA/etcd"
	ensure_pki
	nodes_enabled && nodes_network

	if ! pid_of etcd >/dev/null; then
		# --unsafe-no-fsync: throwaway test data; fsync dominates etcd latency on small VMs.
		start etcd --name local --data-dir "$DATA/etcd" \
			--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
			--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
			--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
			--initial-cluster "local=http://127.0.0.1:$ETCD_PEER_PORT" \
			--unsafe-no-fsync --log-level warn
	fi
	wait_ready etcd

	local apiserver
	if nodes_enabled && apiserver=$(pid_of kube-apiserver) && ! grep -q -- "--bind-address $NODE_GW " <<<"$(tr '\0' ' ' <"/proc/$apiserver/cmdline")"; then
		die "the control plane in $DATA runs without nodes (its API server listens on loopback): stop it ($0 down) before an up with GT_NODES"
	fi
	if ! pid_of kube-apiserver >/dev/null; then
		local node_args=(--endpoint-reconciler-type none --authorization-mode RBAC)
		local admission=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultTolerationSeconds,ResourceQuota,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ValidatingAdmissionPolicy
		if nodes_enabled; then
			# The kubelets' identities are held to their own node (the Node authorizer and NodeRestriction), the
			# API server reaches them by address (their names resolve nowhere), and the kubernetes Service's
			# endpoint is the bridge address the pods reach.
			node_args=(--authorization-mode Node,RBAC --kubelet-preferred-address-types InternalIP
				--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt"
				--kubelet-client-key "$PKI/apiserver-kubelet-client.key" --enable-aggregator-routing=true)
			admission+=,NodeRestriction
		fi
		# Without nodes, --endpoint-reconciler-type none: the default Endpoints "kubernetes" may not hold a
		# loopback address, and nothing runs in pods to use it.
		# shellcheck disable=SC2046
		start kube-apiserver --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
			--bind-address "$API_HOST" --advertise-address "$API_HOST" --secure-port "$APISERVER_PORT" \
			--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
			--client-ca-file "$PKI/ca.crt" \
			--requestheader-client-ca-file "$PKI/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
			--requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
			--requestheader-extra-headers-prefix X-Remote-Extra- \
			--proxy-client-cert-file "$PKI/front-proxy-client.crt" --proxy-client-key-file "$PKI/front-proxy-client.key" \
			--service-account-issuer https://kubernetes.default.svc.cluster.local \
			--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
			--service-cluster-ip-range "$SERVICE_CIDR" \
			"${node_args[@]}" --enable-admission-plugins "$admission" \
			--runtime-config resource.k8s.io/v1=true,resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true \
			--allow-privileged=true --profiling=false $(gates) "${APISERVER_ARGS[@]}"
	fi
	echo "$API_HOST" >"$RUN/api-host"
	wait_ready kube-apiserver
	write_kubeconfig "$KUBECONFIG_FILE" admin
	write_kubeconfig "$DATA/kube-scheduler.kubeconfig" kube-scheduler
	write_kubeconfig "$DATA/kube-controller-manager.kubeconfig" kube-controller-manager

	if ! pid_of kube-controller-manager >/dev/null; then
		# Without kubelets and a cloud, node lifecycle, IPAM, routes and load balancers have
		# nothing to manage; quota, namespace, garbage-collector and resource-claim controllers stay on.
		local kcm=$DATA/kube-controller-manager.kubeconfig
		# With real nodes, node lifecycle lifts the not-ready taint a node registers with (and would evict from a node
		# that stops reporting); simulated nodes never report, so without real nodes it stays off.
		local controllers='*,-nodelifecycle,-nodeipam,-cloud-node-lifecycle,-route,-service'
		nodes_enabled && controllers='*,-nodeipam,-cloud-node-lifecycle,-route,-service'
		# shellcheck disable=SC2046
		start kube-controller-manager --kubeconfig "$kcm" \
			--authentication-kubeconfig "$kcm" --authorization-kubeconfig "$kcm" \
			--bind-address 127.0.0.1 --secure-port "$KCM_PORT" \
			--controllers "$controllers" \
			--use-service-account-credentials=true --leader-elect=false \
			--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
			--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
			--profiling=false $(gates)
	fi
	if ! pid_of kube-scheduler >/dev/null; then
		local scheduler=$DATA/kube-scheduler.kubeconfig
		# shellcheck disable=SC2046
		start kube-scheduler --kubeconfig "$scheduler" \
			--authentication-kubeconfig "$scheduler" --authorization-kubeconfig "$scheduler" \
			--bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false \
			--profiling=false $(gates)
	fi
	wait_ready kube-controller-manager
	wait_ready kube-scheduler
	nodes_enabled && nodes_up
	log "up: kubeconfig $KUBECONFIG_FILE (https://$API_HOST:$APISERVER_PORT)"
}

# signal_and_wait SIGNAL PID SECONDS: true once PID has exited.
signal_and_wait() {
	local i
	kill "-$1" "$2" 2>/dev/null || true
	for ((i = 0; i < $3 * 4; i++)); do
		kill -0 "$2" 2>/dev/null || return 0
		sleep 0.25
	done
	! kill -0 "$2" 2>/dev/null
}

stop() { # stop COMPONENT: SIGTERM the recorded pid, wait, then SIGKILL
	local c=$1 pid
	if ! pid=$(pid_of "$c"); then
		rm -f "$RUN/$c.pid"
		return
	fi
	log "stopping $c (pid $pid)"
	# kube-apiserver drains for a few seconds on SIGTERM.
	if ! signal_and_wait TERM "$pid" 15; then
		log "$c (pid $pid) ignored SIGTERM for 15s; sending SIGKILL"
		signal_and_wait KILL "$pid" 5 || die "$c (pid $pid) survived SIGKILL"
	fi
	rm -f "$RUN/$c.pid"
}

down() {
	local i
	nodes_down
	for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do stop "${COMPONENTS[i]}"; done
	rm -f "$RUN/api-host"
	nodes_release_host
	log "down"
}

status() {
	local c pid rc=0
	for c in "${COMPONENTS[@]}"; do
		if pid=$(pid_of "$c"); then
			if healthy "$c"; then
				printf '%-24s running  pid %-7s healthy  %s\n' "$c" "$pid" "$(health_url "$c")"
			else
				printf '%-24s running  pid %-7s UNHEALTHY %s\n' "$c" "$pid" "$(health_url "$c")"
				rc=1
			fi
		elif [[ -f $RUN/$c.pid ]]; then
			printf '%-24s CRASHED\n' "$c"
			crashed_report "$c" 2>&1
			rc=1
		else
			printf '%-24s stopped\n' "$c"
			rc=1
		fi
	done
	if nodes_enabled; then nodes_status || rc=1; fi
	[[ -f $KUBECONFIG_FILE ]] && echo "kubeconfig: $KUBECONFIG_FILE"
	return $rc
}

case "${1:-}" in
up) up ;;
down) down ;;
packages)
	# Every Debian package the control plane and the nodes need, installed now rather than by the first up: a test
	# that reads the host before an up (tests/nodes) needs the nodes' commands too.
	need_packages "${CONTROL_PLANE_PACKAGES[@]}" "${NODE_PACKAGES[@]}"
	;;
images)
	# The nodes' images into $GT_CLUSTER_DIR/images; prints the lines of scripts/tools/nodeimages/images.lock.
	need_packages /bin/busybox:busybox-static
	nodes_images
	;;
status) status ;;
purge)
	down
	rm -rf "$DATA"
	log "removed $DATA"
	;;
*)
	echo "usage: $0 up|down|status|purge|images|packages" >&2
	exit 2
	;;
esac
