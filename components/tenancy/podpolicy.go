package tenancy

import (
	"fmt"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// The policies on pods in tenant namespaces, and on the ConfigMaps and Secrets pods read variables from. Those that
// limit what a pod may be are bound by namespace, so they hold whoever creates the pod: the tenant's syncer, or the
// StatefulSet controller running a template the syncer may patch. Those that limit what may be done to a running pod
// match only the tenant's identities (celTenantIdentity): the kubelet and the controllers do the same legitimately.

// RuntimeEnvVars are the container variables the NVIDIA Container Toolkit reads to give a container devices, device
// nodes, mounts or driver capabilities outside DRA, under an NVIDIA runtime. With the toolkit's default
// accept-nvidia-visible-devices-envvar-when-unprivileged=true an unprivileged container setting them gets what they
// name, whatever its claims: the GPUs of NVIDIA_VISIBLE_DEVICES; every GPU for a legacy CUDA image (CUDA_VERSION
// without NVIDIA_REQUIRE_CUDA) that leaves NVIDIA_VISIBLE_DEVICES unset; IMEX channels; and, once a device is given,
// GPUDirect Storage, MOFED, NVSwitch, GDRCopy and Tegra devices and mounts; the toolkit of GPU Operator v25.3
// (v1.17.8) gives those last ones even with the setting off (NVIDIA/nvidia-container-toolkit v1.20.2
// internal/config/image/cuda_image.go VisibleDevices, IsLegacy, ImexChannelRequests; v1.17.8
// internal/modifier/gated.go; https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
// The NVIDIA_REQUIRE_* constraints add nothing. An image's own ENV is out of admission's sight: the runtime class
// rule and the node's toolkit settings are what hold against it; this rule is defence in depth.
var RuntimeEnvVars = []string{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_MIG_CONFIG_DEVICES",
	"NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_IMEX_CHANNELS", "NVIDIA_GDS", "NVIDIA_MOFED", "NVIDIA_NVSWITCH",
	"NVIDIA_GDRCOPY", "NVIDIA_REQUIRE_JETPACK", "CUDA_VERSION"}

// NoDevices is the one value of NVIDIA_VISIBLE_DEVICES a tenant container may set: no GPU at all, overriding whatever
// its image sets (the toolkit treats "void" as "no devices and no driver": cuda_image.go DevicesFromEnvvars).
const NoDevices = "void"

// The pod annotation key forms a container runtime or plugin turns into devices: CDI devices by annotation
// (cdi.k8s.io/<name>, honoured by CRI-O, by containerd with pod annotation passthrough and by the NVIDIA runtime;
// nvidia.cdi.k8s.io, nvidia.cdi.k8s.io/pod and nvidia.cdi.k8s.io/container.<name> for the NRI plugin of GPU Operator
// v26, which from toolkit v1.20.0 serves any namespace under any runtime) and CRI-O's own device annotations
// (io.kubernetes.cri-o.Devices, devices.crio.io): https://github.com/cncf-tags/container-device-interface (SPEC.md,
// "Annotations"); cri-o/cri-o pkg/annotations; NVIDIA/nvidia-container-toolkit v1.20.2
// cmd/nvidia-ctk-installer/container/runtime/nri/plugin.go parseCDIDevices. A pod's annotations reach its sandbox
// (kubernetes v1.34.4 pkg/kubelet/kuberuntime/labels.go newPodAnnotations).
var (
	deviceAnnotationInfixes   = []string{"cdi.k8s.io"}
	deviceAnnotationPrefixes  = []string{"io.kubernetes.cri-o."}
	deviceAnnotationSuffixes  = []string{".crio.io", ".cri-o.io"}
	deviceListMountPathMarker = "nvidia-container-devices"
)

// gpuExtendedResourcePrefixes are the extended-resource names that reach GPUs without a claim: the driver class's
// extendedResourceName nvidia.com/gpu (and the device plugin's nvidia.com/* names) and DRA's implicit
// deviceclass.resource.kubernetes.io/<class> (dra-driver-nvidia-gpu v0.4.0 templates/deviceclass-gpu.yaml).
var gpuExtendedResourcePrefixes = []string{"nvidia.com/", "deviceclass.resource.kubernetes.io/"}

// celContainers are every container of a pod, ephemeral ones included.
const celContainers = `object.spec.?containers.orValue([]) + object.spec.?initContainers.orValue([]) +
	object.spec.?ephemeralContainers.orValue([])`

// runtimeEnvPolicy refuses tenant containers, init containers and ephemeral containers that set an NVIDIA runtime
// variable by name (but NVIDIA_VISIBLE_DEVICES=void, which only takes devices away), or take variables through
// envFrom with a prefix that, followed by a key, can spell one. (Keys of ConfigMaps and Secrets without a prefix are
// runtimeEnvKeysPolicy's; a variable's value may come from anywhere, its name is always in the pod.) Checked when a
// pod is created and when ephemeral containers are added: containers are immutable otherwise.
var runtimeEnvPolicy = admissionPolicy{
	name: RuntimeEnvPolicy,
	rules: []admissionRule{
		{group: "", resources: []string{"pods"}, operations: createUpdate},
		{group: "", resources: []string{"pods/ephemeralcontainers"}, operations: update},
	},
	matchConditions: []celNamed{{"containers-added", `request.operation == 'CREATE' || request.?subResource.orValue('') == 'ephemeralcontainers'`}},
	variables: []celNamed{
		{"tenant", celTenant},
		{"containers", celContainers},
		{"byName", `variables.containers
	.filter(c, c.?env.orValue([]).exists(e, e.name in $RUNTIME_ENV &&
		!(e.name == 'NVIDIA_VISIBLE_DEVICES' && e.?value.orValue('') == $NO_DEVICES && !has(e.valueFrom))))
	.map(c, c.name)`},
		{"byPrefix", `variables.containers
	.filter(c, c.?envFrom.orValue([]).exists(f, f.?prefix.orValue('') != '' && $RUNTIME_ENV.exists(v, v.startsWith(f.prefix))))
	.map(c, c.name)`},
	},
	validations: []celValidation{
		{
			expression: `size(variables.byName) == 0`,
			message: `'tenant ' + variables.tenant + ': containers ' + variables.byName.join(', ') +
	' set NVIDIA runtime variables (' + $RUNTIME_ENV.join(', ') + '), which expose GPUs outside DRA; claim a granted DeviceClass instead'`,
		},
		{
			expression: `size(variables.byPrefix) == 0`,
			message: `'tenant ' + variables.tenant + ': containers ' + variables.byPrefix.join(', ') +
	' take envFrom with a prefix that can spell an NVIDIA runtime variable (' + $RUNTIME_ENV.join(', ') + ')'`,
		},
	},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "RUNTIME_ENV": celList(RuntimeEnvVars),
		"NO_DEVICES": celString(NoDevices)},
}

// runtimeEnvKeysPolicy refuses, in tenant namespaces, ConfigMaps and Secrets with a data key named like an NVIDIA
// runtime variable: envFrom without a prefix turns every data key into a variable, and admission cannot read a
// ConfigMap from a pod (the kubelet reads data only, not binaryData: kubernetes v1.34.4
// pkg/kubelet/kubelet_pods.go makeEnvironmentVariables).
var runtimeEnvKeysPolicy = admissionPolicy{
	name:  RuntimeEnvKeysPolicy,
	rules: []admissionRule{{group: "", resources: []string{"configmaps", "secrets"}, operations: createUpdate}},
	variables: []celNamed{
		{"tenant", celTenant},
		{"keys", `object.?data.orValue({}).map(k, k).filter(k, k in $RUNTIME_ENV)`},
	},
	validations: []celValidation{{
		expression: `size(variables.keys) == 0`,
		message: `'tenant ' + variables.tenant + ': ' + request.kind.kind + ' ' + object.metadata.name + ' has keys ' +
	variables.keys.join(', ') + ', names of NVIDIA runtime variables that envFrom would set in a container, exposing GPUs outside DRA'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "RUNTIME_ENV": celList(RuntimeEnvVars)},
}

// extendedResourcePolicy refuses GPU extended resources in container requests and limits, but the names of the
// classes granted to the tenant; limits count too because an extended resource's request defaults to its limit.
// named maps each extended-resource name a catalog DeviceClass carries to its class (KEP-5004): the scheduler gives a
// pod asking for one a device of that class and makes its claim itself, so the name is checked against the
// namespace's grant labels here, whoever writes the pod. Every other name that reaches a GPU is refused outright:
// nvidia.com/ (the device plugin's, and the driver class's nvidia.com/gpu) and the implicit
// deviceclass.resource.kubernetes.io/<class>, which the quota charges only when the scheduler creates the claim
// (kubernetes v1.36.3 pkg/quota/v1/evaluator/core/pods.go charges the explicit name at admission), so an over-quota
// pod would wait in the scheduler instead of being refused. A DeviceClass outside the catalog that maps any other
// name is the business of the class guard (extendedResourceClassPolicy). Pod-level resources take no extended
// resources (kubernetes v1.36.3 pkg/apis/core/validation/validation.go validatePodResourceName).
func extendedResourcePolicy(named map[string]string) admissionPolicy {
	return admissionPolicy{
		name:  ExtendedResourcePolicy,
		rules: []admissionRule{{group: "", resources: []string{"pods"}, operations: createUpdate}},
		// Containers' resources change only through pods/resize, which takes cpu and memory only.
		matchConditions: []celNamed{{"created-or-spec-changed", celCreatedOrSpecChanged}},
		variables: []celNamed{
			{"tenant", celTenant},
			{"containers", `object.spec.?containers.orValue([]) + object.spec.?initContainers.orValue([])`},
			{"offending", `variables.containers
	.filter(c, [c.?resources.?requests.orValue({}), c.?resources.?limits.orValue({})]
		.exists(m, m.exists(k, $PREFIXES.exists(p, k.startsWith(p)))))
	.map(c, c.name)`},
			{"ungranted", `$NAMED.map(k, k).filter(k,
	namespaceObject.metadata.?labels[?($GRANT_PREFIX + $NAMED[k])].orValue('') != 'true' &&
	variables.containers.exists(c, k in c.?resources.?requests.orValue({}) || k in c.?resources.?limits.orValue({})))`},
		},
		validations: []celValidation{
			{
				expression: `size(variables.offending) == 0`,
				message: `'tenant ' + variables.tenant + ': containers ' + variables.offending.join(', ') +
	' request GPUs as extended resources (' + $PREFIXES.join('*, ') + '*); ask for a granted class by its own name, or claim it through a ResourceClaim'`,
			},
			{
				expression: `size(variables.ungranted) == 0`,
				message: `'tenant ' + variables.tenant + ' is not granted ' + variables.ungranted.map(k, k + ' (DeviceClass ' + $NAMED[k] + ')').join(', ') +
	'; its classes are the DeviceClasses labelled ' + $CLASS_LABEL_PREFIX + variables.tenant + '=true'`,
			},
		},
		literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "PREFIXES": celList(gpuExtendedResourcePrefixes),
			"NAMED": celMap(named), "GRANT_PREFIX": celString(naming.ClassGrantLabelPrefix), "CLASS_LABEL_PREFIX": celString(naming.ClassTenantLabelPrefix)},
	}
}

// nodeDevicePolicy refuses the ways to a node's GPUs that go around DRA and that a pod spec can name:
//   - a RuntimeClass outside the platform's list. The GPU Operator creates nvidia, nvidia-cdi and nvidia-legacy;
//     under them the NVIDIA runtime reads the image's own ENV NVIDIA_VISIBLE_DEVICES=all (set in every CUDA base
//     image, out of admission's sight) and hands the container every GPU of the node (NVIDIA/gpu-operator v25.10.0
//     controllers/object_controls.go, the RuntimeClass loop);
//   - CDI and CRI-O device annotations (deviceAnnotationInfixes and the rest), checked whenever they change;
//   - mounts at the toolkit's device-list path, which it reads as a device request when
//     accept-nvidia-visible-devices-as-volume-mounts is on (cuda_image.go requestsFromMounts).
var nodeDevicePolicy = func(runtimeClasses []string) admissionPolicy {
	return admissionPolicy{
		name: NodeDevicePolicy,
		rules: []admissionRule{
			{group: "", resources: []string{"pods"}, operations: createUpdate},
			{group: "", resources: []string{"pods/ephemeralcontainers"}, operations: update},
			// The status subresource takes annotations as sent (podPhasePolicy): whoever writes them, device
			// annotations are checked there too.
			{group: "", resources: []string{"pods/status"}, operations: update},
		},
		variables: []celNamed{
			{"tenant", celTenant},
			{"runtimeClass", `request.operation == 'CREATE' ? object.spec.?runtimeClassName.orValue('') : ''`},
			{"oldAnnotations", `request.operation == 'CREATE' ? {} : oldObject.metadata.?annotations.orValue({})`},
			{"deviceAnnotations", `object.metadata.?annotations.orValue({}).map(k, k)
	.filter(k, $INFIXES.exists(m, k.contains(m)) || $PREFIXES.exists(m, k.startsWith(m)) || $SUFFIXES.exists(m, k.endsWith(m)))
	.filter(k, !(k in variables.oldAnnotations) || variables.oldAnnotations[k] != object.metadata.annotations[k])`},
			{"deviceListMounts", `request.operation != 'CREATE' && request.?subResource.orValue('') != 'ephemeralcontainers' ? [] :
	(` + celContainers + `).filter(c, c.?volumeMounts.orValue([]).exists(m, m.mountPath.contains($MOUNT_MARKER))).map(c, c.name)`},
		},
		validations: []celValidation{
			{
				expression: `variables.runtimeClass == '' || variables.runtimeClass in $RUNTIME_CLASSES`,
				message: `'tenant ' + variables.tenant + ': RuntimeClass ' + variables.runtimeClass + ' is not one tenants may use (' +
	($RUNTIME_CLASSES.size() == 0 ? 'none' : $RUNTIME_CLASSES.join(', ')) +
	'): the NVIDIA runtime classes give a container the GPUs its image asks for, outside DRA'`,
			},
			{
				expression: `size(variables.deviceAnnotations) == 0`,
				message: `'tenant ' + variables.tenant + ': annotations ' + variables.deviceAnnotations.join(', ') +
	' ask the container runtime for devices outside DRA (CDI or CRI-O device annotations)'`,
			},
			{
				expression: `size(variables.deviceListMounts) == 0`,
				message: `'tenant ' + variables.tenant + ': containers ' + variables.deviceListMounts.join(', ') +
	' mount at the NVIDIA toolkit device-list path (' + $MOUNT_MARKER + '), which can request GPUs outside DRA'`,
			},
		},
		literals: map[string]string{
			"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "RUNTIME_CLASSES": celList(runtimeClasses),
			"INFIXES": celList(deviceAnnotationInfixes), "PREFIXES": celList(deviceAnnotationPrefixes),
			"SUFFIXES": celList(deviceAnnotationSuffixes), "MOUNT_MARKER": celString(deviceListMountPathMarker),
		},
	}
}

// Taints every tenant pod may tolerate, because Kubernetes itself adds the tolerations inside the tenant's virtual
// cluster and vCluster copies them to the host pod: the DefaultTolerationSeconds admission plugin gives every pod a
// bounded toleration of not-ready and unreachable (kubernetes v1.34.4
// plugin/pkg/admission/defaulttolerationseconds/admission.go), and the DaemonSet controller gives every DaemonSet pod
// the node-condition taints, unschedulable among them, and network-unavailable to host-network pods (kubernetes
// v1.34.4 pkg/controller/daemon/util/daemonset_util.go AddOrUpdateDaemonPodTolerations). A validating policy cannot
// take a toleration off, so refusing them would refuse every tenant DaemonSet. The cost is that a cordon
// (node.kubernetes.io/unschedulable) does not keep tenant pods off a node: quarantine and maintenance use
// MaintenanceTaint, which no tenant may tolerate (docs/threat-model.md, "Node placement").
var DefaultTolerableTaints = []string{
	"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
	"node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
	"node.kubernetes.io/unschedulable", "node.kubernetes.io/network-unavailable",
}

// MaintenanceTaint is the taint the platform puts on a node to drain it of tenant pods (NoExecute) or keep them off
// it (NoSchedule): for maintenance, a faulty GPU, or quarantine. No tenant pod may tolerate it, so unlike a cordon it
// holds against tenant DaemonSets too.
const MaintenanceTaint = "gpu-tenancy.io/maintenance"

// DefaultScheduler is the scheduler every tenant pod may go through; AdmissionArgs.Schedulers adds others.
const DefaultScheduler = "default-scheduler"

// DefaultMaxTenantPriority is the highest priority a tenant pod may have without a class the platform lists: the
// priority of a pod without a class on a cluster without a default class (kubernetes v1.34.4
// pkg/apis/scheduling/types.go DefaultPriorityWhenNoDefaultClassExists). No tenant pod then preempts another tenant's.
const DefaultMaxTenantPriority = 0

// podPlacementPolicy keeps tenant pods where the platform places them:
//   - tolerations only of the taints listed (the GPU pools', those Kubernetes adds itself, and those the platform
//     adds), and of the dedicated taint (naming.DedicatedNodeKey) with the pod's own tenant as its value: an Exists
//     toleration of that key, or another tenant's value, would put the pod on the pools dedicated to other tenants, so
//     that key is judged by this rule alone, whatever the lists hold (AdmissionArgs.Validate refuses it there too). A
//     toleration without a key tolerates every taint, MaintenanceTaint among them. Tolerations may be added to a
//     running pod, so updates are checked too;
//   - no spec.nodeName at creation: a pod bound on creation skips the scheduler, and the kubelet enforces only
//     NoExecute taints (kubernetes v1.34.4 pkg/kubelet/lifecycle/predicate.go), so NoSchedule taints would not stop
//     it. vCluster leaves it empty unless its own scheduler is on, which the platform never turns on;
//   - a scheduler the platform lists, which applies those taints;
//   - a priority no higher than the platform's band (maxPriority), unless the pod names a class the platform lists:
//     a higher priority preempts other tenants' pods and is the last a node evicts. The Priority admission plugin has
//     resolved spec.priority from the class (or the cluster's default class) before validating policies run
//     (kubernetes v1.34.4 pkg/kubeapiserver/options/plugins.go, plugin/pkg/admission/priority/admission.go), so the
//     value is checked, whoever created the class; a tenant's own synced classes are bounded by priorityClassPolicy;
//   - pod affinity and anti-affinity only among the pod's own namespace: a term with namespaces or a
//     namespaceSelector reaches other tenants' pods, and a required anti-affinity term is also honoured against pods
//     scheduled later, so one tenant could keep others (their vCluster control planes included) off nodes or zones,
//     or learn where they run (kubernetes v1.34.4 pkg/scheduler/framework/plugins/interpodaffinity/filtering.go).
//     vCluster writes neither field (loft-sh/vcluster v0.36.1 pkg/controllers/resources/pods/translate/translator.go
//     translatePodAffinityTerm), so a synced pod's terms always mean its own namespace. Topology spread constraints
//     count only the pod's own namespace and need no rule.
func podPlacementPolicy(tolerableTaints, priorityClasses, schedulers []string, maxPriority int) admissionPolicy {
	return admissionPolicy{
		name:  PodPlacementPolicy,
		rules: []admissionRule{{group: "", resources: []string{"pods"}, operations: createUpdate}},
		variables: []celNamed{
			{"tenant", celTenant},
			{"created", `request.operation == 'CREATE'`},
			{"newTolerations", `object.spec.?tolerations.orValue([])
	.filter(t, variables.created || !(t in oldObject.spec.?tolerations.orValue([])))`},
			{"refusedTolerations", `variables.newTolerations
	.filter(t, t.?key.orValue('') == $DEDICATED ?
		!(t.?operator.orValue('Equal') == 'Equal' && t.?value.orValue('') == variables.tenant) :
		!(t.?key.orValue('') in $TOLERABLE))
	.map(t, t.?key.orValue('') == '' ? '(every taint)' :
		t.key == $DEDICATED ? t.key + (t.?operator.orValue('Equal') == 'Exists' ? ' (every tenant)' : '=' + t.?value.orValue('')) : t.key)`},
			{"nodeName", `variables.created ? object.spec.?nodeName.orValue('') : ''`},
			{"scheduler", `variables.created ? object.spec.?schedulerName.orValue($DEFAULT_SCHEDULER) : $DEFAULT_SCHEDULER`},
			{"priorityClass", `variables.created ? object.spec.?priorityClassName.orValue('') : ''`},
			{"priority", `variables.created ? object.spec.?priority.orValue(0) : 0`},
			{"foreignAffinity", `!variables.created ? [] :
	(object.spec.?affinity.?podAffinity.?requiredDuringSchedulingIgnoredDuringExecution.orValue([]) +
	 object.spec.?affinity.?podAntiAffinity.?requiredDuringSchedulingIgnoredDuringExecution.orValue([]) +
	 object.spec.?affinity.?podAffinity.?preferredDuringSchedulingIgnoredDuringExecution.orValue([]).map(w, w.podAffinityTerm) +
	 object.spec.?affinity.?podAntiAffinity.?preferredDuringSchedulingIgnoredDuringExecution.orValue([]).map(w, w.podAffinityTerm))
	.filter(t, has(t.namespaceSelector) || t.?namespaces.orValue([]).exists(n, n != request.namespace))
	.map(t, t.topologyKey)`},
		},
		validations: []celValidation{
			{
				expression: `size(variables.refusedTolerations) == 0`,
				message: `'tenant ' + variables.tenant + ': pod ' + object.metadata.name + ' tolerates taints ' +
	variables.refusedTolerations.join(', ') + '; tenant pods may tolerate only ' + $TOLERABLE.join(', ') +
	', and ' + $DEDICATED + '=' + variables.tenant + ' of the pools dedicated to their own tenant'`,
			},
			{
				expression: `variables.nodeName == ''`,
				message: `'tenant ' + variables.tenant + ': pod ' + object.metadata.name + ' names node ' + variables.nodeName +
	': tenant pods are placed by the scheduler, which applies the taints of nodes under maintenance or quarantine'`,
			},
			{
				expression: `variables.scheduler in $SCHEDULERS`,
				message: `'tenant ' + variables.tenant + ': pod ' + object.metadata.name + ' asks for scheduler ' + variables.scheduler +
	'; tenant pods are placed by ' + $SCHEDULERS.join(', ')`,
			},
			{
				expression: `variables.priorityClass in $PRIORITY_CLASSES || variables.priority <= $MAX_PRIORITY`,
				message: `'tenant ' + variables.tenant + ': pod ' + object.metadata.name + ' has priority ' + string(variables.priority) +
	(variables.priorityClass == '' ? '' : ' (PriorityClass ' + variables.priorityClass + ')') +
	'; tenant pods may have at most ' + string($MAX_PRIORITY) + ' unless they name a class the platform allows (' +
	($PRIORITY_CLASSES.size() == 0 ? 'none' : $PRIORITY_CLASSES.join(', ')) + '): a higher priority preempts other tenants\' pods'`,
			},
			{
				expression: `size(variables.foreignAffinity) == 0`,
				message: `'tenant ' + variables.tenant + ': pod ' + object.metadata.name + ' has pod affinity terms (topology ' +
	variables.foreignAffinity.join(', ') + ') that reach other namespaces (namespaces or namespaceSelector): ' +
	'tenant pods may be placed only relative to their own namespace\'s pods'`,
			},
		},
		literals: map[string]string{
			"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "TOLERABLE": celList(tolerableTaints),
			"DEDICATED":        celString(naming.DedicatedNodeKey),
			"PRIORITY_CLASSES": celList(priorityClasses), "DEFAULT_SCHEDULER": celString(DefaultScheduler),
			"SCHEDULERS":   celList(uniqueSorted(append([]string{DefaultScheduler}, schedulers...))),
			"MAX_PRIORITY": fmt.Sprint(maxPriority),
		},
	}
}

// priorityClassPolicy bounds the PriorityClasses a tenant's identities write. vCluster copies each PriorityClass of
// the virtual cluster to the host (sync.toHost.priorityClasses), so that a pod of a class with preemptionPolicy Never
// keeps its class on the host, where the Priority admission plugin otherwise refuses a pod that sets Never without a
// class (kubernetes v1.34.4 plugin/pkg/admission/priority/admission.go; loft-sh/vcluster v0.36.1
// pkg/controllers/resources/pods/translate/translator.go). That sync grants the syncer every verb on every
// PriorityClass of the cluster (chart/templates/clusterrole.yaml), so a tenant identity may create or change only a
// class of its own vCluster (label vcluster.loft.sh/managed-by, which vCluster sets: pkg/util/translate), never the
// cluster's default (globalDefault), never above the tenants' band, and may delete only its own. vCluster's copy of a
// virtual system class is capped at the highest user value (1e9: priorityclasses/translate.go) and so refused here.
//
// A class's name is checked too, at creation: vCluster names a virtual class's host copy
// vcluster-<class>-x-<namespace>-x-<release>, cut to 52 characters and a hash past 63 (pkg/util/translate
// single_namespace.go HostNameCluster, translate.go SafeConcatName), and annotates it with the virtual name
// (vcluster.loft.sh/object-name, translate.go addHostAnnotations). A tenant that created a class under another
// tenant's host name, with its own label, would keep that tenant's vCluster from ever writing it, and every pod of
// that class from starting (the Priority plugin refuses a pod's priority without its class). The name must be the one
// vCluster derives from the annotation; a hashed name is matched on the part before its hash, which CEL cannot
// compute, so a squat of a hashed name stays possible where its first 52 characters end before the two tenants'
// names differ (with tenants team-a and team-b, every hashed name: threat model).
//
// And its size: PriorityClasses are cluster-scoped, so no quota counts them, and they stay until deleted. The API
// server bounds neither the description nor the metadata beyond etcd's request size, so a class of a megabyte was
// admitted. Nor the managed fields: the API server keeps the managedFields a client sends (k8s.io/apimachinery v0.34.4
// pkg/util/managedfields/internal/fieldmanager.go Update, "to allow directly updating managed fields"), and a class
// with 340 KB of made-up label paths in them was stored on the API server. So a class's managed fields may name only a
// PriorityClass's own fields and the labels and annotations it has (the API server takes a removed field out of every
// manager's set: sigs.k8s.io/structured-merge-diff/v6 v6.3.3 merge/update.go), of at most MaxManagers managers;
// vCluster sets no finalizer or owner reference on a cluster-scoped copy (pkg/util/translate/translate.go
// CopyObjectWithName), so none is allowed. vCluster copies the virtual class's description, labels and annotations
// (kubectl's last-applied-configuration among them, which holds the description again) and adds its own few
// annotations: the bounds leave room for all of that with a description of MaxPriorityClassDescription characters.
func priorityClassPolicy(maxPriority int, controllerNamespaces []string) admissionPolicy {
	// vCluster labels a cluster-scoped host object with vcluster-<tenant>-x-<tenant>, cut to 52 characters and a hash
	// past 63 (loft-sh/vcluster v0.36.1 pkg/util/translate/single_namespace.go MarkerLabelCluster, translate.go
	// SafeConcatName); CEL has no SHA-256, so a long one is matched on the part before the hash.
	owned := func(label string) string {
		return `(size(variables.marker) <= 63 ? ` + label + ` == variables.marker :
	size(` + label + `) == 63 && ` + label + `.startsWith(variables.marker.substring(0, 52) + '-'))`
	}
	return admissionPolicy{
		name:            PriorityClassPolicy,
		rules:           []admissionRule{{group: "scheduling.k8s.io", resources: []string{"priorityclasses"}, operations: []string{"CREATE", "UPDATE", "DELETE"}}},
		matchConditions: []celNamed{{"a-tenant-identity", celTenantServiceAccount}},
		variables: []celNamed{
			{"tenant", celTenantOfServiceAccount},
			{"marker", `$NAMESPACE_PREFIX + variables.tenant + '-x-' + variables.tenant`},
			{"class", `request.operation == 'DELETE' ? oldObject : object`},
			{"owner", `variables.class.metadata.?labels[?$MANAGED_BY].orValue('')`},
			{"oldOwner", `request.operation == 'CREATE' ? variables.owner : oldObject.metadata.?labels[?$MANAGED_BY].orValue('')`},
			{"hostName", `'vcluster-' + variables.class.metadata.?annotations[?$OBJECT_NAME].orValue('') + '-x-' + variables.marker`},
			{"hashedPrefix", `size(variables.hostName) <= 63 ? '' : (variables.hostName.substring(0, 52) + '-').replace('.-', '-')`},
		},
		validations: []celValidation{
			{
				expression: owned("variables.owner") + ` && ` + owned("variables.oldOwner") + ` && (request.operation != 'CREATE' ||
	(size(variables.hostName) <= 63 ? object.metadata.name == variables.hostName :
	size(object.metadata.name) == size(variables.hashedPrefix) + 10 && object.metadata.name.startsWith(variables.hashedPrefix)))`,
				message: `'tenant ' + variables.tenant + ' (' + request.userInfo.username + ') may write only the PriorityClasses of its own vCluster (' +
	$MANAGED_BY + '=' + variables.marker + ', named as vCluster names the class its ' + $OBJECT_NAME + ' annotation names: ' +
	variables.hostName + ', hashed past 63 characters), not ' + variables.class.metadata.name`,
			},
			{
				expression: `request.operation == 'DELETE' || (object.value <= $MAX_PRIORITY && !object.?globalDefault.orValue(false))`,
				message: `'tenant ' + variables.tenant + ': PriorityClass ' + variables.class.metadata.name + ' may have a value of at most ' +
	string($MAX_PRIORITY) + ' and may not be the cluster\'s default: it would preempt other tenants\' pods'`,
			},
			{
				expression: `request.operation == 'DELETE' || (size(object.metadata.?finalizers.orValue([])) == 0 &&
	size(object.metadata.?ownerReferences.orValue([])) == 0 && size(object.metadata.?managedFields.orValue([])) <= $MAX_MANAGERS &&
	object.metadata.?managedFields.orValue([]).all(m, [m.?manager.orValue(''), m.?apiVersion.orValue(''), m.?subresource.orValue('')]
	.all(f, size(f) <= $MAX_FIELD) && (!has(m.fieldsV1) || dyn(m.fieldsV1).all(k, k in $CLASS_FIELDS && (k != 'f:metadata' ?
	size(dyn(m.fieldsV1)[k]) == 0 : dyn(m.fieldsV1)[k].all(j, j in $METADATA_FIELDS && dyn(m.fieldsV1)[k][j].all(l, size(dyn(m.fieldsV1)[k][j][l]) == 0 &&
	(l == '.' || (l.startsWith('f:') && l.substring(2) in
	(j == 'f:labels' ? object.metadata.?labels.orValue({}) : object.metadata.?annotations.orValue({})))))))))))`,
				message: `'tenant ' + variables.tenant + ': PriorityClass ' + object.metadata.name + ' may carry no finalizers or owner references, ' +
	'and managed fields only of the fields, labels and annotations it has, of at most ' + string($MAX_MANAGERS) +
	' managers: no quota counts PriorityClasses'`,
			},
			{
				expression: `request.operation == 'DELETE' || (size(object.?description.orValue('')) <= $MAX_DESCRIPTION &&
	[object.metadata.?labels.orValue({}), object.metadata.?annotations.orValue({})].map(m, m.map(k, size(k) + size(m[k])).sum()).sum() <= $MAX_METADATA &&
	size(object.metadata.?labels.orValue({})) + size(object.metadata.?annotations.orValue({})) <= $MAX_KEYS)`,
				message: `'tenant ' + variables.tenant + ': PriorityClass ' + object.metadata.name + ' may have at most ' + string($MAX_DESCRIPTION) +
	' characters of description and ' + string($MAX_METADATA) + ' of labels and annotations, ' + string($MAX_KEYS) +
	' of them at most: no quota counts PriorityClasses'`,
			},
		},
		literals: map[string]string{
			"MANAGED_BY": celString(naming.VClusterManagedByLabel), "MAX_PRIORITY": fmt.Sprint(maxPriority),
			"OBJECT_NAME": celString(vclusterObjectNameAnnotation), "MAX_DESCRIPTION": fmt.Sprint(MaxPriorityClassDescription),
			"MAX_METADATA": fmt.Sprint(MaxPriorityClassMetadata),
			"MAX_MANAGERS": fmt.Sprint(MaxManagers), "MAX_FIELD": fmt.Sprint(maxQualifiedName), "MAX_KEYS": fmt.Sprint(MaxPriorityClassKeys),
			"CLASS_FIELDS":     celList([]string{"f:metadata", "f:value", "f:description", "f:preemptionPolicy", "f:globalDefault"}),
			"METADATA_FIELDS":  celList([]string{".", "f:labels", "f:annotations"}),
			"NAMESPACE_PREFIX": celString(naming.NamespacePrefix), "PLATFORM_NAMESPACES": celList(controllerNamespaces),
		},
	}
}

// Bounds of a tenant's PriorityClass (priorityClassPolicy).
const (
	// MaxPriorityClassDescription is how long its description may be.
	MaxPriorityClassDescription = 1024
	// MaxPriorityClassMetadata is how many characters of labels and annotations, keys and values, it may carry: enough for
	// vCluster's own annotations and for kubectl's last-applied-configuration of a class with the longest description,
	// which JSON may spell at up to six characters a character (\u003c for <).
	MaxPriorityClassMetadata = 8192
	// MaxPriorityClassKeys is how many labels and annotations it may carry in all, each of which its managed fields
	// name again for every manager.
	MaxPriorityClassKeys = 64
)

// MaxManagers is how many managers may hold fields of a tenant's PriorityClass or event (their managed fields): the
// writer, and a few the operators' tools add.
const MaxManagers = 4

// vclusterObjectNameAnnotation is where vCluster records the virtual name of the host object it writes
// (loft-sh/vcluster v0.36.1 pkg/util/translate/types.go NameAnnotation).
const vclusterObjectNameAnnotation = "vcluster.loft.sh/object-name"

// podPhasePolicy: a pod's phase and claim statuses are the kubelet's and the scheduler's to write. A tenant's syncer
// holds patch on pods/status (loft-sh/vcluster v0.36.1 chart/templates/role.yaml), and a forged terminal phase tells
// the resource-claim controller the pod is done: it releases the pod's claims (and deletes generated ones) while the
// kubelet, which adopts the terminal phase, still runs the container through its grace period
// (kubernetes v1.34.4 pkg/controller/resourceclaim/controller.go isPodDone; pkg/kubelet/kubelet_pods.go). The device
// looks free, the next claim gets it. Quota also stops counting a terminal pod. The status subresource also takes a
// pod's labels, annotations and finalizers as sent (kubernetes v1.34.4 pkg/registry/core/pod/strategy.go
// podStatusStrategy.PrepareForUpdate resets only the spec, the deletion timestamp and the owner references), out of the
// sight of every guard bound to pods: an annotation added there reaches the container runtime when the pod's
// containers next start. The device annotations are checked there too (nodeDevicePolicy); as defence in depth, a
// tenant identity's status update may not change the pod's metadata at all. vCluster's never does: it applies the
// status part of its patch to the object it has just updated or read, and updates that (pkg/patcher/apply.go
// ApplyObjectPatch).
var podPhasePolicy = admissionPolicy{
	name:            PodPhasePolicy,
	rules:           []admissionRule{{group: "", resources: []string{"pods/status"}, operations: update}},
	matchConditions: []celNamed{{"tenant-identity", celTenantIdentity}},
	variables: []celNamed{
		{"resizes", `[object, oldObject].map(o, o.status.?conditions.orValue([]).filter(c, c.type in $RESIZE_CONDITIONS))`},
		{"changed", ownedStatusChanges() + ` +
	(variables.resizes[0] != variables.resizes[1] ? ['conditions (' + $RESIZE_CONDITIONS.join(', ') + ')'] : [])`},
		{"metadataChanged", `(object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) ? ['labels'] : []) +
	(object.metadata.?annotations.orValue({}) != oldObject.metadata.?annotations.orValue({}) ? ['annotations'] : []) +
	(object.metadata.?finalizers.orValue([]) != oldObject.metadata.?finalizers.orValue([]) ? ['finalizers'] : [])`},
	},
	validations: []celValidation{
		{
			expression: `size(variables.changed) == 0`,
			message: `'pod ' + object.metadata.name + ': ' + request.userInfo.username + ' may not change status.' +
	variables.changed.join(', status.') + '; the kubelet and the scheduler write them'`,
		},
		{
			expression: `size(variables.metadataChanged) == 0`,
			message: `'pod ' + object.metadata.name + ': ' + request.userInfo.username + ' may not change metadata.' +
	variables.metadataChanged.join(', metadata.') + ' through pods/status, where the guards bound to pods do not look; update the pod itself'`,
		},
	},
	literals: map[string]string{"RESIZE_CONDITIONS": celList(resizeConditions)},
}

// kubeletOwnedStatus are the pod status fields the kubelet and the scheduler write and others read as theirs: the
// phase and claim statuses (above); the nominated node, which the scheduler counts against that node's capacity for
// every pod of no higher priority, even for a gated pod (kubernetes v1.34.4 pkg/scheduler/backend/queue
// scheduling_queue.go UpdateNominatedPod, framework addGENominatedPods); the container statuses, whose resources the
// scheduler and the quota take over the spec's while a resize is pending (k8s.io/component-helpers v0.34.4
// resource/helpers.go determineContainerReqs); the pod's addresses and QoS class. vCluster changes none of them on
// the host: it updates a host pod's status with the virtual pod's conditions (its readiness gates) and sends every
// other field back as it read it (loft-sh/vcluster v0.36.1 pkg/controllers/resources/pods/translate/diff.go,
// pkg/patcher/apply.go Status().Update). Its conditions list replaces the host's whole, and the virtual pod's list
// wins when both changed since the last sync: where it lags behind a resize condition the kubelet has since changed,
// it would send that condition back changed. That update is refused, and vCluster syncs the pod again from the host.
var kubeletOwnedStatus = []string{"phase", "resourceClaimStatuses", "extendedResourceClaimStatus", "nominatedNodeName",
	"containerStatuses", "initContainerStatuses", "ephemeralContainerStatuses", "resize", "podIP", "podIPs", "hostIP",
	"hostIPs", "qosClass", "startTime"}

// ownedStatusChanges is CEL for the kubeletOwnedStatus fields a request changes, each selected by name so that the
// expression reads the Pod's own fields.
func ownedStatusChanges() string {
	terms := make([]string, len(kubeletOwnedStatus))
	for i, f := range kubeletOwnedStatus {
		terms[i] = fmt.Sprintf("(object.status.?%s != oldObject.status.?%s ? [%q] : [])", f, f, f)
	}
	return strings.Join(terms, " +\n\t")
}

// resizeConditions are the pod conditions that say a resize is pending or under way, with which the container
// statuses' resources count instead of the spec's (kubernetes v1.34.4 pkg/apis/core/types.go).
var resizeConditions = []string{"PodResizePending", "PodResizeInProgress"}

// gracefulDeletePolicy: a pod deleted without a grace period is gone from the API at once, its claims are released
// and its devices handed to the next claim, while the kubelet stops its containers only when it notices
// (kubernetes v1.34.4 pkg/registry/core/pod/strategy.go CheckGracefulDelete; pkg/kubelet/kubelet_pods.go
// HandlePodCleanups). Refused to a tenant's identities for a pod bound to a node and not yet finished (an unbound or
// finished pod has no container to wait for), and refused for any pod created with terminationGracePeriodSeconds 0,
// which makes a plain delete immediate too. vCluster passes a force delete inside the virtual cluster on to the host
// (pkg/controllers/resources/pods/syncer.go), where it is refused in turn; a graceful delete goes through.
var gracefulDeletePolicy = admissionPolicy{
	name: GracefulDeletePolicy,
	rules: []admissionRule{
		{group: "", resources: []string{"pods"}, operations: remove},
		{group: "", resources: []string{"pods"}, operations: create},
	},
	matchConditions: []celNamed{{"created-or-deleted-by-the-tenant", `request.operation == 'CREATE' || ` + celTenantIdentity}},
	variables: []celNamed{
		{"forced", `request.operation == 'DELETE' && request.?options.?gracePeriodSeconds.orValue(-1) == 0 &&
	oldObject.spec.?nodeName.orValue('') != '' && !(oldObject.status.?phase.orValue('') in ['Succeeded', 'Failed'])`},
		{"noGracePeriod", `request.operation == 'CREATE' && object.spec.?terminationGracePeriodSeconds.orValue(1) == 0`},
	},
	validations: []celValidation{
		{
			expression: `!variables.forced`,
			message: `'pod ' + oldObject.metadata.name + ': ' + request.userInfo.username +
	' may not delete a running pod without its grace period: its devices would be handed on while its containers still run'`,
		},
		{
			expression: `!variables.noGracePeriod`,
			message:    `'pod ' + object.metadata.name + ': terminationGracePeriodSeconds must be at least 1, so that a delete waits for its containers to stop'`,
		},
	},
}
