package tenancy

import (
	"fmt"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const tenantNS = "vcluster-team-a"

// tenantPod is a plain pod in team-a's namespace, edited by edit.
func tenantPod(edit func(*corev1.Pod)) *corev1.Pod {
	p := pod([]corev1.Container{container("main", nil, nil)}, nil)
	p.Namespace = tenantNS
	if edit != nil {
		edit(p)
	}
	return p
}

func TestNoRuntimeVariablesTheToolkitReadsForDevices(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	byName := "set NVIDIA runtime variables"
	for _, tt := range []struct {
		name       string
		env        corev1.EnvVar
		wantDenied []string
	}{
		{"CUDA_VERSION marks a legacy image, which gets every GPU", corev1.EnvVar{Name: "CUDA_VERSION", Value: "12.4.1"}, []string{byName}},
		{"IMEX channels", corev1.EnvVar{Name: "NVIDIA_IMEX_CHANNELS", Value: "0"}, []string{byName}},
		{"GPUDirect Storage", corev1.EnvVar{Name: "NVIDIA_GDS", Value: "enabled"}, []string{byName}},
		{"MOFED", corev1.EnvVar{Name: "NVIDIA_MOFED", Value: "enabled"}, []string{byName}},
		{"NVSwitch", corev1.EnvVar{Name: "NVIDIA_NVSWITCH", Value: "enabled"}, []string{byName}},
		{"GDRCopy", corev1.EnvVar{Name: "NVIDIA_GDRCOPY", Value: "enabled"}, []string{byName}},
		{"Tegra CSV mounts", corev1.EnvVar{Name: "NVIDIA_REQUIRE_JETPACK", Value: "csv-mounts=all"}, []string{byName}},
		{"a CUDA constraint adds nothing", corev1.EnvVar{Name: "NVIDIA_REQUIRE_CUDA", Value: "cuda>=12.0"}, nil},
		{"no devices at all is admitted", corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: NoDevices}, nil},
		{"void from a ConfigMap is not literal", corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", ValueFrom: &corev1.EnvVarSource{
			ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}, Key: "void"}}}, []string{byName}},
		{"all devices denied", corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}, []string{byName}},
		{"a library's own NVIDIA variable is admitted", corev1.EnvVar{Name: "NVIDIA_TF32_OVERRIDE", Value: "0"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tenantPod(func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{tt.env} })
			assertDenied(t, h.create(t, tenantNS, podGVK, podGVR, p), tt.wantDenied)
		})
	}
	t.Run("envFrom with the prefix CUDA_", func(t *testing.T) {
		p := tenantPod(func(p *corev1.Pod) { p.Spec.Containers[0] = withEnvFrom(p.Spec.Containers[0], "CUDA_") })
		assertDenied(t, h.create(t, tenantNS, podGVK, podGVR, p), []string{"take envFrom with a prefix"})
	})
}

func TestNoNodeDevicePathsAroundDRA(t *testing.T) {
	admission := testAdmission
	admission.RuntimeClasses = []string{"gvisor"}
	h := newHarness(t, runPlatformWith(t, admission, testClasses, teamA()))
	annotated := func(key string) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Annotations = map[string]string{key: "nvidia.com/gpu=all"} }
	}
	mounted := func(path string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: path}}
		}
	}
	for _, tt := range []struct {
		name       string
		edit       func(*corev1.Pod)
		wantDenied []string
	}{
		{"the NVIDIA runtime class", func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("nvidia") },
			[]string{"RuntimeClass nvidia is not one tenants may use (gvisor)"}},
		{"the NVIDIA legacy runtime class", func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("nvidia-legacy") }, []string{"RuntimeClass nvidia-legacy"}},
		{"a listed runtime class", func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("gvisor") }, nil},
		{"a CDI device annotation", annotated("cdi.k8s.io/hostile"), []string{"annotations cdi.k8s.io/hostile ask the container runtime for devices"}},
		{"the GPU Operator's NRI annotation", annotated("nvidia.cdi.k8s.io/pod"), []string{"nvidia.cdi.k8s.io/pod"}},
		{"the NRI annotation without a name", annotated("nvidia.cdi.k8s.io"), []string{"annotations nvidia.cdi.k8s.io ask"}},
		{"a CRI-O device annotation", annotated("io.kubernetes.cri-o.Devices"), []string{"io.kubernetes.cri-o.Devices"}},
		{"CRI-O's newer annotation form", annotated("devices.crio.io"), []string{"devices.crio.io"}},
		{"other annotations", annotated("example.com/team"), nil},
		{"the toolkit's device-list mount", mounted("/var/run/nvidia-container-devices/all"), []string{"containers main mount at the NVIDIA toolkit device-list path"}},
		{"the same under /run", mounted("/run/nvidia-container-devices/cdi/nvidia.com/gpu/all"), []string{"device-list path"}},
		{"another mount", mounted("/data"), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, h.create(t, tenantNS, podGVK, podGVR, tenantPod(tt.edit)), tt.wantDenied)
		})
	}

	t.Run("an annotation added to a running pod", func(t *testing.T) {
		old := tenantPod(nil)
		updated := tenantPod(annotated("cdi.k8s.io/late"))
		assertDenied(t, h.admit(t, tenantNS, podGVK, podGVR, updated, old), []string{"cdi.k8s.io/late"})
	})
	t.Run("an update that keeps an annotation from before the policy", func(t *testing.T) {
		old := tenantPod(annotated("cdi.k8s.io/old"))
		updated := old.DeepCopy()
		updated.Labels = map[string]string{"x": "y"}
		assert.Empty(t, h.admit(t, tenantNS, podGVK, podGVR, updated, old))
	})
	t.Run("an ephemeral container mounting the device list", func(t *testing.T) {
		old := tenantPod(mounted("/data"))
		debug := old.DeepCopy()
		debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox", VolumeMounts: []corev1.VolumeMount{{Name: "d", MountPath: "/var/run/nvidia-container-devices/all"}}}}}
		denials := h.do(t, request{namespace: tenantNS, gvk: podGVK, gvr: podGVR, subresource: "ephemeralcontainers", obj: debug, old: old})
		assertDenied(t, denials, []string{"containers debug mount"})
	})
	t.Run("no runtime class may be listed by default", func(t *testing.T) {
		h := newHarness(t, runPlatform(t, testClasses, teamA()))
		assertDenied(t, h.create(t, tenantNS, podGVK, podGVR, tenantPod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("gvisor") })),
			[]string{"RuntimeClass gvisor is not one tenants may use (none)"})
	})
}

// prioritized sets a pod's class and the priority the Priority admission plugin resolves from it.
func prioritized(class string, priority int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName, p.Spec.Priority = class, ptr.To(priority) }
}

func withAffinity(term corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	}
}

func withAntiAffinity(term corev1.PodAffinityTerm) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}
	}
}

func TestPodsArePlacedByTheScheduler(t *testing.T) {
	admission := testAdmission
	admission.PriorityClasses = []string{"tenant-batch"}
	admission.TolerableTaints = []string{"example.com/spot"}
	h := newHarness(t, runPlatformWith(t, admission, testClasses, teamA()))
	tolerating := func(tolerations ...corev1.Toleration) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.Tolerations = tolerations }
	}
	gpu := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	notReady := corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists,
		Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))}
	for _, tt := range []struct {
		name       string
		edit       func(*corev1.Pod)
		wantDenied []string
	}{
		{"the GPU taint and the default ones", tolerating(gpu, notReady), nil},
		{"a taint the platform lists", tolerating(corev1.Toleration{Key: "example.com/spot", Operator: corev1.TolerationOpExists}), nil},
		{"every taint", tolerating(gpu, corev1.Toleration{Operator: corev1.TolerationOpExists}),
			[]string{"pod test tolerates taints (every taint); tenant pods may tolerate only"}},
		// The tolerations the DaemonSet controller gives every DaemonSet pod (kubernetes v1.34.4
		// pkg/controller/daemon/util/daemonset_util.go), cordons included: a tenant DaemonSet runs.
		{"a DaemonSet pod's tolerations", tolerating(
			corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			corev1.Toleration{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			corev1.Toleration{Key: "node.kubernetes.io/disk-pressure", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			corev1.Toleration{Key: "node.kubernetes.io/memory-pressure", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			corev1.Toleration{Key: "node.kubernetes.io/pid-pressure", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			corev1.Toleration{Key: "node.kubernetes.io/unschedulable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			corev1.Toleration{Key: "node.kubernetes.io/network-unavailable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
			gpu), nil},
		{"the platform's maintenance taint", tolerating(corev1.Toleration{Key: MaintenanceTaint, Operator: corev1.TolerationOpExists}),
			[]string{"tolerates taints " + MaintenanceTaint}},
		{"its own tenant's dedicated pools, as its vCluster writes the toleration", tolerating(gpu, corev1.Toleration{Key: naming.DedicatedNodeKey,
			Operator: corev1.TolerationOpEqual, Value: "team-a", Effect: corev1.TaintEffectNoSchedule}), nil},
		{"another tenant's dedicated pools", tolerating(corev1.Toleration{Key: naming.DedicatedNodeKey, Value: "team-b",
			Effect: corev1.TaintEffectNoSchedule}), []string{"tolerates taints " + naming.DedicatedNodeKey + "=team-b"}},
		{"every tenant's dedicated pools", tolerating(corev1.Toleration{Key: naming.DedicatedNodeKey, Operator: corev1.TolerationOpExists}),
			[]string{"tolerates taints " + naming.DedicatedNodeKey + " (every tenant)"}},
		{"a quarantine taint", tolerating(corev1.Toleration{Key: "example.com/quarantine", Value: "x", Effect: corev1.TaintEffectNoExecute}),
			[]string{"example.com/quarantine"}},
		{"a node picked at creation", func(p *corev1.Pod) { p.Spec.NodeName = "gpu-a100-whole-0" },
			[]string{"pod test names node gpu-a100-whole-0"}},
		{"another scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "lenient" }, []string{"asks for scheduler lenient"}},
		{"the default scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = DefaultScheduler }, nil},
		// As the Priority admission plugin leaves the pod before validating policies run: spec.priority resolved from
		// the class.
		{"a critical priority class", prioritized("system-node-critical", 2000001000),
			[]string{"pod test has priority 2000001000 (PriorityClass system-node-critical); tenant pods may have at most 0 unless they name a class the platform allows (tenant-batch)"}},
		{"a class of a higher value", prioritized("vcluster-high-x-vcluster-team-a-x-team-a", 1000),
			[]string{"pod test has priority 1000"}},
		{"a listed priority class, whatever its value", prioritized("tenant-batch", 5000), nil},
		{"a non-preempting class of the tenant's vCluster", func(p *corev1.Pod) {
			prioritized("vcluster-batch-x-vcluster-team-a-x-team-a", 0)(p)
			p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever)
		}, nil},
		{"a lower priority", prioritized("vcluster-scavenger-x-vcluster-team-a-x-team-a", -10), nil},
		{"affinity among its own namespace's pods", withAffinity(corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}), nil},
		{"affinity naming its own namespace", withAffinity(corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
			Namespaces: []string{tenantNS}, LabelSelector: &metav1.LabelSelector{}}), nil},
		{"anti-affinity against every namespace", withAntiAffinity(corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
			NamespaceSelector: &metav1.LabelSelector{}, LabelSelector: &metav1.LabelSelector{}}),
			[]string{"pod test has pod affinity terms (topology kubernetes.io/hostname) that reach other namespaces"}},
		{"affinity naming another tenant's namespace", withAffinity(corev1.PodAffinityTerm{TopologyKey: "topology.kubernetes.io/zone",
			Namespaces: []string{"vcluster-team-b"}, LabelSelector: &metav1.LabelSelector{}}),
			[]string{"topology topology.kubernetes.io/zone"}},
		{"preferred anti-affinity by namespace labels", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
				Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "kubernetes.io/hostname",
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gpu-tenancy.io/tenant": "team-b"}}}}}}}
		}, []string{"reach other namespaces"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, h.create(t, tenantNS, podGVK, podGVR, tenantPod(tt.edit)), tt.wantDenied)
		})
	}
	t.Run("a toleration added to a running pod", func(t *testing.T) {
		old := tenantPod(tolerating(gpu))
		updated := tenantPod(tolerating(gpu, corev1.Toleration{Operator: corev1.TolerationOpExists}))
		assertDenied(t, h.admit(t, tenantNS, podGVK, podGVR, updated, old), []string{"(every taint)"})
	})
	t.Run("a bound pod keeps its node on update", func(t *testing.T) {
		old := tenantPod(func(p *corev1.Pod) { p.Spec.NodeName = "gpu-a100-whole-0" })
		updated := old.DeepCopy()
		updated.Labels = map[string]string{"x": "y"}
		assert.Empty(t, h.admit(t, tenantNS, podGVK, podGVR, updated, old))
	})
}

func TestTheTenantCannotEndAPodBehindTheKubeletsBack(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	running := tenantPod(func(p *corev1.Pod) {
		p.Spec.NodeName = "gpu-a100-whole-0"
		p.Status.Phase = corev1.PodRunning
		p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("test-gpu")}}
	})
	kubelet := "system:node:gpu-a100-whole-0"
	statusUpdate := func(user string, edit func(*corev1.Pod)) request {
		updated := running.DeepCopy()
		edit(updated)
		return request{namespace: tenantNS, gvk: podGVK, gvr: podGVR, subresource: "status", obj: updated, old: running, user: user}
	}
	deletion := func(user string, grace *int64, old *corev1.Pod) request {
		return request{namespace: tenantNS, gvk: podGVK, gvr: podGVR, old: old, user: user,
			deleteOptions: &metav1.DeleteOptions{GracePeriodSeconds: grace}}
	}
	unbound := tenantPod(nil)
	finished := running.DeepCopy()
	finished.Status.Phase = corev1.PodSucceeded
	for _, tt := range []struct {
		name       string
		req        request
		wantDenied []string
	}{
		{"the syncer forges a terminal phase", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
			[]string{"pod test: system:serviceaccount:vcluster-team-a:vc-syncer may not change status.phase"}},
		{"another service account of the namespace", statusUpdate("system:serviceaccount:vcluster-team-a:default",
			func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), []string{"may not change status.phase"}},
		{"the syncer drops the claim statuses", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) { p.Status.ResourceClaimStatuses = nil }),
			[]string{"status.resourceClaimStatuses"}},
		{"the syncer copies a readiness condition", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: "example.com/ready", Status: corev1.ConditionTrue}}
		}), nil},
		{"the syncer nominates a node", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) { p.Status.NominatedNodeName = "gpu-b-0" }),
			[]string{"may not change status.nominatedNodeName"}},
		{"the syncer shrinks what its containers hold", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Resources: &corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}}}}
		}), []string{"status.containerStatuses"}},
		{"the syncer says a resize is pending", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: "Infeasible"}}
		}), []string{"status.conditions (PodResizePending, PodResizeInProgress)"}},
		{"the syncer rewrites the pod's address", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) { p.Status.PodIP = "10.9.9.9" }),
			[]string{"status.podIP"}},
		{"the syncer adds an annotation through status", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) {
			p.Annotations = map[string]string{"example.com/runtime-hint": "x"}
		}), []string{"may not change metadata.annotations through pods/status"}},
		{"the syncer relabels a pod through status", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} }),
			[]string{"may not change metadata.labels through pods/status"}},
		{"the syncer adds a finalizer through status", statusUpdate(syncer(tenantNS), func(p *corev1.Pod) { p.Finalizers = []string{"example.com/keep"} }),
			[]string{"may not change metadata.finalizers through pods/status"}},
		{"the kubelet's status update asks for CDI devices", statusUpdate(kubelet, func(p *corev1.Pod) {
			p.Annotations = map[string]string{"cdi.k8s.io/hostile": "nvidia.com/gpu=all"}
		}), []string{"annotations cdi.k8s.io/hostile ask the container runtime for devices outside DRA"}},
		{"the kubelet ends the pod", statusUpdate(kubelet, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), nil},
		{"the kubelet says a resize is pending", statusUpdate(kubelet, func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: "Infeasible"}}
		}), nil},
		{"the syncer force-deletes a running pod", deletion(syncer(tenantNS), ptr.To(int64(0)), running),
			[]string{"may not delete a running pod without its grace period"}},
		{"the syncer deletes it gracefully", deletion(syncer(tenantNS), ptr.To(int64(30)), running), nil},
		{"the syncer deletes it with the pod's own grace period", deletion(syncer(tenantNS), nil, running), nil},
		{"an unbound pod has nothing to wait for", deletion(syncer(tenantNS), ptr.To(int64(0)), unbound), nil},
		{"a finished pod has nothing to wait for", deletion(syncer(tenantNS), ptr.To(int64(0)), finished), nil},
		{"the kubelet removes a stopped pod", deletion(kubelet, ptr.To(int64(0)), running), nil},
		{"pod garbage collection", deletion("system:serviceaccount:kube-system:pod-garbage-collector", ptr.To(int64(0)), running), nil},
	} {
		t.Run(tt.name, func(t *testing.T) { assertDenied(t, h.do(t, tt.req), tt.wantDenied) })
	}
	t.Run("a pod without a grace period", func(t *testing.T) {
		p := tenantPod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(0)) })
		assertDenied(t, h.create(t, tenantNS, podGVK, podGVR, p), []string{"terminationGracePeriodSeconds must be at least 1"})
		p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(1))
		assert.Empty(t, h.create(t, tenantNS, podGVK, podGVR, p))
	})
}

func TestTheTenantCannotReleaseAnAllocatedClaim(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	allocated := claim(tenantNS, "a100", true, "trainer")
	allocated.Finalizers = []string{DeleteProtectionFinalizer}
	stripped := allocated.DeepCopy()
	stripped.Finalizers = nil
	relabelled := allocated.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	update := func(user string, obj, old *resourceapi.ResourceClaim) request {
		return request{namespace: tenantNS, gvk: claimGVK, gvr: claimGVR, obj: obj, old: old, user: user}
	}
	for _, tt := range []struct {
		name       string
		req        request
		wantDenied []string
	}{
		{"the syncer strips the finalizer", update(syncer(tenantNS), stripped, allocated),
			[]string{"ResourceClaim gpu: system:serviceaccount:vcluster-team-a:vc-syncer may not remove resource.kubernetes.io/delete-protection"}},
		{"the syncer relabels the claim", update(syncer(tenantNS), relabelled, allocated), nil},
		{"the claim controller removes it after deallocation", update("system:serviceaccount:kube-system:resource-claim-controller", stripped, allocated), nil},
	} {
		t.Run(tt.name, func(t *testing.T) { assertDenied(t, h.do(t, tt.req), tt.wantDenied) })
	}
}

func TestClaimsMayNotTolerateDeviceTaints(t *testing.T) {
	admission := testAdmission
	admission.TolerableDeviceTaints = []string{"example.com/maintenance"}
	h := newHarness(t, runPlatformWith(t, admission, testClasses, teamA()))
	tolerating := func(r resourceapi.DeviceRequest, tolerations ...resourceapi.DeviceToleration) resourceapi.DeviceRequest {
		if r.Exactly != nil {
			r.Exactly.Tolerations = tolerations
		}
		for i := range r.FirstAvailable {
			r.FirstAvailable[i].Tolerations = tolerations
		}
		return r
	}
	every := resourceapi.DeviceToleration{Operator: resourceapi.DeviceTolerationOpExists}
	xid := resourceapi.DeviceToleration{Key: "gpu.nvidia.com/xid", Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoSchedule}
	maintenance := resourceapi.DeviceToleration{Key: "example.com/maintenance", Operator: resourceapi.DeviceTolerationOpExists}
	for _, tt := range []struct {
		name       string
		template   bool
		spec       resourceapi.ResourceClaimSpec
		wantDenied []string
	}{
		{"every device taint", false, claimSpec(tolerating(exactly("gpu", "a100"), every)),
			[]string{"tenant team-a: requests gpu tolerate device taints", "tolerable device taints: example.com/maintenance"}},
		{"a faulty GPU's taint through firstAvailable", false, claimSpec(exactly("ok", "a100"), tolerating(firstAvailable("alt", "a100"), xid)),
			[]string{"requests alt tolerate device taints"}},
		{"in a template", true, claimSpec(tolerating(exactly("gpu", "a100"), xid)), []string{"tolerate device taints"}},
		{"a taint the platform lists", false, claimSpec(tolerating(exactly("gpu", "a100"), maintenance)), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, claimOrTemplate(t, h, tenantNS, tt.template, tt.spec), tt.wantDenied)
		})
	}
}

func TestServicesDoNotCaptureOthersTraffic(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	svc := func(ips ...string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: tenantNS},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}, ExternalIPs: ips}}
	}
	assert.Empty(t, h.create(t, tenantNS, serviceGVK, serviceGVR, svc()), "a ClusterIP Service")
	assertDenied(t, h.create(t, tenantNS, serviceGVK, serviceGVR, svc("203.0.113.10")),
		[]string{"tenant team-a: Service web sets externalIPs 203.0.113.10"})
	assertDenied(t, h.admit(t, tenantNS, serviceGVK, serviceGVR, svc("203.0.113.11"), svc()), []string{"203.0.113.11"})
	assert.Empty(t, h.create(t, "ml-platform", serviceGVK, serviceGVR, svc("203.0.113.10")), "outside tenant namespaces")
	ports := func(n int) *corev1.Service {
		s := svc()
		s.Spec.Ports = nil
		for i := range n {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(8000 + i)})
		}
		return s
	}
	assert.Empty(t, h.create(t, tenantNS, serviceGVK, serviceGVR, ports(MaxEndpointPorts)), "ten ports")
	assertDenied(t, h.create(t, tenantNS, serviceGVK, serviceGVR, ports(MaxEndpointPorts+1)),
		[]string{"Service web has 11 ports; a tenant Service may have at most 10"})
}

// Every endpoint of every port is programmed on every node: a tenant's EndpointSlices and Endpoints are bounded in
// both, whoever writes them, the host's controllers' slices of ordinary Services fitting within.
func TestEndpointsProgrammedOnEveryNodeAreBounded(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	slice := func(endpoints, ports int) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-abc", Namespace: tenantNS,
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}, AddressType: discoveryv1.AddressTypeIPv4}
		for i := range endpoints {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.1.%d.%d", i/250, i%250+1)}})
		}
		for i := range ports {
			s.Ports = append(s.Ports, discoveryv1.EndpointPort{Port: ptr.To(int32(8000 + i))})
		}
		return s
	}
	endpoints := func(addresses, ports int) *corev1.Endpoints {
		e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: tenantNS}, Subsets: []corev1.EndpointSubset{{}}}
		for i := range addresses {
			e.Subsets[0].Addresses = append(e.Subsets[0].Addresses, corev1.EndpointAddress{IP: fmt.Sprintf("10.2.%d.%d", i/250, i%250+1)})
		}
		for i := range ports {
			e.Subsets[0].Ports = append(e.Subsets[0].Ports, corev1.EndpointPort{Port: int32(9000 + i)})
		}
		return e
	}
	controller := "system:serviceaccount:kube-system:endpointslice-controller"
	for _, tt := range []struct {
		name       string
		obj        runtime.Object
		gvk        schema.GroupVersionKind
		gvr        schema.GroupVersionResource
		user       string
		wantDenied []string
	}{
		{"a Service's slice as the controller writes it", slice(100, 3), sliceGVK, sliceGVR, controller, nil},
		{"the controller's placeholder slice of a Service that selects no pod (endpoints and ports null)", slice(0, 0), sliceGVK, sliceGVR, controller, nil},
		{"a selector-less Service's slice as vCluster copies it", slice(2, 1), sliceGVK, sliceGVR, "", nil},
		{"a slice of too many endpoints", slice(101, 1), sliceGVK, sliceGVR, "",
			[]string{"EndpointSlice web-abc has 101 endpoint addresses and 1 ports; at most 100 and 10"}},
		{"a slice of few endpoints holding too many addresses", func() runtime.Object {
			s := slice(2, 1)
			for i := range 99 {
				s.Endpoints[0].Addresses = append(s.Endpoints[0].Addresses, fmt.Sprintf("10.3.0.%d", i+1))
			}
			return s
		}(), sliceGVK, sliceGVR, "", []string{"EndpointSlice web-abc has 101 endpoint addresses"}},
		{"a slice of too many ports", slice(1, 11), sliceGVK, sliceGVR, "", []string{"has 1 endpoint addresses and 11 ports"}},
		{"the controller's slice of a Service too wide", slice(100, 11), sliceGVK, sliceGVR, controller, []string{"11 ports"}},
		{"Endpoints of a selector-less Service", endpoints(3, 2), endpointsGVK, endpointsGVR, "", nil},
		{"Endpoints of too many addresses", endpoints(101, 1), endpointsGVK, endpointsGVR, "", []string{"Endpoints db has 101 endpoint addresses"}},
		{"Endpoints of too many ports", endpoints(1, 11), endpointsGVK, endpointsGVR, "", []string{"has 1 endpoint addresses and 11 ports"}},
		// No dataplane reads the Endpoints controller's objects, which list every selected pod in one object.
		{"the Endpoints controller's Endpoints of a Service over 150 pods", endpoints(150, 2), endpointsGVK, endpointsGVR,
			"system:serviceaccount:kube-system:endpoint-controller", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, h.do(t, request{namespace: tenantNS, gvk: tt.gvk, gvr: tt.gvr, obj: tt.obj, user: tt.user}), tt.wantDenied)
		})
	}
}

// A tenant's vCluster copies its PriorityClasses to the host, so its non-preempting pods keep their class there; what
// it writes stays within the tenants' band and its own vCluster's classes.
func TestTenantsPriorityClassesStayInTheirBand(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	class := func(name, owner string, value int32, edit func(*schedulingv1.PriorityClass)) *schedulingv1.PriorityClass {
		c := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}, Value: value,
			PreemptionPolicy: ptr.To(corev1.PreemptNever)}
		// vCluster records the virtual name: vcluster-<virtual>-x-<namespace>-x-<release>.
		if virtual, _, ok := strings.Cut(strings.TrimPrefix(name, "vcluster-"), "-x-"); ok {
			c.Annotations = map[string]string{"vcluster.loft.sh/object-name": virtual}
		}
		if owner != "" {
			c.Labels[naming.VClusterManagedByLabel] = owner
		}
		if edit != nil {
			edit(c)
		}
		return c
	}
	teamA := "vcluster-team-a-x-team-a"
	syncerA := syncer("vcluster-team-a")
	long := "tenant-with-a-name-long-enough-to-be-hashed"
	longMarker := ("vcluster-" + long + "-x-" + long)[:52] + "-0123456789"
	hashed := func(virtual, release string) func(*schedulingv1.PriorityClass) {
		return func(c *schedulingv1.PriorityClass) {
			c.Name = ("vcluster-" + virtual + "-x-vcluster-" + release + "-x-" + release)[:52] + "-0123456789"
			c.Annotations = map[string]string{"vcluster.loft.sh/object-name": virtual}
		}
	}
	withDescription := func(n int) func(*schedulingv1.PriorityClass) {
		return func(c *schedulingv1.PriorityClass) {
			c.Description = strings.Repeat("d", n)
			// kubectl apply in the virtual cluster records the whole class, which vCluster copies with the annotations.
			c.Annotations["kubectl.kubernetes.io/last-applied-configuration"] = `{"apiVersion":"scheduling.k8s.io/v1","description":"` +
				c.Description + `","kind":"PriorityClass","metadata":{"annotations":{},"name":"batch"},"preemptionPolicy":"Never","value":0}`
		}
	}
	for _, tt := range []struct {
		name       string
		obj, old   *schedulingv1.PriorityClass
		delete     bool
		user       string
		wantDenied []string
	}{
		{name: "a non-preempting class of its own", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0, nil)},
		{name: "a lower class of its own", obj: class("vcluster-scavenger-x-vcluster-team-a-x-team-a", teamA, -100, nil)},
		{name: "a class above the band", obj: class("vcluster-high-x-vcluster-team-a-x-team-a", teamA, 1000, nil),
			wantDenied: []string{"PriorityClass vcluster-high-x-vcluster-team-a-x-team-a may have a value of at most 0"}},
		{name: "a virtual system class as vCluster caps it", obj: class("vcluster-system-node-critical-x-vcluster-team-a-x-team-a", teamA, 1000000000, nil),
			wantDenied: []string{"may have a value of at most 0"}},
		{name: "the cluster's default class", obj: class("vcluster-default-x-vcluster-team-a-x-team-a", teamA, 0,
			func(c *schedulingv1.PriorityClass) { c.GlobalDefault = true }), wantDenied: []string{"may not be the cluster's default"}},
		{name: "a class posing as another tenant's", obj: class("vcluster-batch-x-vcluster-team-b-x-team-b", "vcluster-team-b-x-team-b", 0, nil),
			wantDenied: []string{"tenant team-a (" + syncerA + ") may write only the PriorityClasses of its own vCluster"}},
		{name: "another tenant's class name taken first, with its own label", obj: class("vcluster-batch-x-vcluster-team-b-x-team-b", teamA, 0, nil),
			wantDenied: []string{"named as vCluster names the class its vcluster.loft.sh/object-name annotation names: vcluster-batch-x-vcluster-team-a-x-team-a"}},
		{name: "another tenant's class name taken first, its virtual name chosen to match", obj: class("vcluster-batch-x-vcluster-team-b-x-team-b", teamA, 0,
			func(c *schedulingv1.PriorityClass) {
				c.Annotations["vcluster.loft.sh/object-name"] = "batch-x-vcluster-team-b-x-team-b"
			}), wantDenied: []string{"its own vCluster"}},
		{name: "a hashed class name of its own", obj: class("", teamA, 0, hashed(strings.Repeat("b", 50), "team-a"))},
		{name: "a class without a vCluster's label", obj: class("batch", "", 0, nil), wantDenied: []string{"may write only the PriorityClasses of its own vCluster"}},
		{name: "a class applied with kubectl with the longest description", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			withDescription(MaxPriorityClassDescription))},
		{name: "a class of a megabyte of description", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			func(c *schedulingv1.PriorityClass) { c.Description = strings.Repeat("d", 1<<20) }),
			wantDenied: []string{"may have at most 1024 characters of description and 8192 of labels and annotations"}},
		{name: "a class with the managed fields the API server records for vCluster's write", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			withManagedFields(managedFields("scheduling.k8s.io/v1", "vcluster", `{"f:description":{},"f:metadata":{"f:annotations":{".":{},"f:vcluster.loft.sh/object-name":{}},`+
				`"f:labels":{".":{},"f:vcluster.loft.sh/managed-by":{}}},"f:preemptionPolicy":{},"f:value":{}}`)))},
		{name: "a class with managed fields of made-up label paths", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			withManagedFields(managedFields("scheduling.k8s.io/v1", "vcluster", `{"f:metadata":{"f:labels":{`+madeUpPaths(2000)+`}}}`))),
			wantDenied: []string{"managed fields only of the fields, labels and annotations it has"}},
		{name: "a class of many short labels, each named again in its managed fields", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			func(c *schedulingv1.PriorityClass) {
				for i := range 100 {
					c.Labels[fmt.Sprintf("l%d", i)] = ""
				}
			}), wantDenied: []string{"64 of them at most"}},
		{name: "a class with managed fields of one label it does not have", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			withManagedFields(managedFields("scheduling.k8s.io/v1", "vcluster", `{"f:metadata":{"f:labels":{".":{},"f:vcluster.loft.sh/managed-by":{},"f:absent":{}}}}`))),
			wantDenied: []string{"managed fields only of the fields, labels and annotations it has"}},
		{name: "a class with managed fields below a label path", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			withManagedFields(managedFields("scheduling.k8s.io/v1", "vcluster", `{"f:metadata":{"f:labels":{"f:a":{`+madeUpPaths(10)+`}}}}`))),
			wantDenied: []string{"managed fields only of the fields, labels and annotations it has"}},
		{name: "a class with managed fields of fields it does not have", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			withManagedFields(managedFields("scheduling.k8s.io/v1", "vcluster", `{"f:spec":{`+madeUpPaths(10)+`}}`))),
			wantDenied: []string{"managed fields only of the fields, labels and annotations it has"}},
		{name: "a class with many managers", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			func(c *schedulingv1.PriorityClass) {
				for _, m := range []string{"a", "b", "c", "d", "e"} {
					c.ManagedFields = append(c.ManagedFields, managedFields("scheduling.k8s.io/v1", m, `{}`))
				}
			}),
			wantDenied: []string{"at most 4 managers"}},
		{name: "a class with a finalizer", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			func(c *schedulingv1.PriorityClass) { c.Finalizers = []string{"example.com/" + strings.Repeat("f", 60)} }),
			wantDenied: []string{"may carry no finalizers or owner references"}},
		{name: "a class with an owner reference", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			func(c *schedulingv1.PriorityClass) {
				c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: strings.Repeat("n", 4096), UID: "u"}}
			}),
			wantDenied: []string{"may carry no finalizers or owner references"}},
		{name: "a class of large annotations", obj: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0,
			func(c *schedulingv1.PriorityClass) { c.Annotations["filler"] = strings.Repeat("a", 200<<10) }),
			wantDenied: []string{"8192 of labels and annotations"}},
		{name: "another tenant's class taken over", obj: class("vcluster-batch-x-vcluster-team-b-x-team-b", teamA, 0, nil),
			old: class("vcluster-batch-x-vcluster-team-b-x-team-b", "vcluster-team-b-x-team-b", 0, nil), wantDenied: []string{"its own vCluster"}},
		{name: "another tenant's class deleted", old: class("vcluster-batch-x-vcluster-team-b-x-team-b", "vcluster-team-b-x-team-b", 0, nil),
			delete: true, wantDenied: []string{"its own vCluster"}},
		{name: "the platform's own class deleted", old: class("platform-batch", "", 100, nil), delete: true, wantDenied: []string{"its own vCluster"}},
		{name: "its own class deleted", old: class("vcluster-batch-x-vcluster-team-a-x-team-a", teamA, 0, nil), delete: true},
		{name: "a class of a tenant whose marker is hashed", obj: class("", longMarker, 0, hashed("batch", long)),
			user: syncer("vcluster-" + long)},
		{name: "the platform's own identity", obj: class("platform-high", "", 100000, nil), user: "admin"},
		{name: "a controller of the platform", obj: class("platform-high", "", 100000, nil),
			user: "system:serviceaccount:vcluster-platform:loft"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := request{gvk: priorityClassGVK, gvr: priorityClassGVR, user: tt.user}
			if r.user == "" {
				r.user = syncerA
			}
			if tt.obj != nil {
				r.obj = tt.obj
			}
			if tt.old != nil {
				r.old = tt.old
			}
			if tt.delete {
				r.obj, r.deleteOptions = nil, &metav1.DeleteOptions{}
			}
			assertDenied(t, h.do(t, r), tt.wantDenied)
		})
	}
}

func TestVolumeClaimsDoNotBindExistingVolumes(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	pvc := func(edit func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		// The class the DefaultStorageClass plugin fills in where the cluster has a default class.
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: tenantNS},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("standard-rwo")}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	assert.Empty(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(nil)))
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = nil })),
		[]string{"names no storage class and the cluster has no default class to give it"})
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-of-team-b" })),
		[]string{"PersistentVolumeClaim data names volume pv-of-team-b"})
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	})), []string{"selects existing volumes by label"})
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") })),
		[]string{"asks for the empty storage class"})
	assert.Empty(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard-rwo") })),
		"a claim of a storage class")
	beta := func(class string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) {
			c.Spec.StorageClassName = nil
			c.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": class}
		}
	}
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(beta(""))), []string{"asks for the empty storage class"})
	assert.Empty(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(beta("standard-rwo"))), "a claim of a class in its older spelling")
	assertDenied(t, h.admit(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") }),
		pvc(nil)), []string{"asks for the empty storage class"})
	assertDenied(t, h.admit(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": ""}
	}), pvc(nil)), []string{"asks for the empty storage class"})
	snapshot := func(namespace *string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) {
			c.Spec.DataSourceRef = &corev1.TypedObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot",
				Name: "weights", Namespace: namespace}
		}
	}
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(snapshot(ptr.To("vcluster-team-b")))),
		[]string{"PersistentVolumeClaim data fills its volume from namespace vcluster-team-b"})
	assert.Empty(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(snapshot(nil))), "a claim filled from its own namespace's snapshot")
	assert.Empty(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(snapshot(ptr.To(tenantNS)))), "its own namespace, named")
	bound := pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-1" })
	assertDenied(t, h.admit(t, tenantNS, pvcGVK, pvcGVR, bound, pvc(nil)), []string{"names volume pv-1"})
	binder := request{namespace: tenantNS, gvk: pvcGVK, gvr: pvcGVR, obj: bound, old: pvc(nil),
		user: "system:serviceaccount:kube-system:persistent-volume-binder"}
	assert.Empty(t, h.do(t, binder), "the persistent-volume controller binds")
}

// projectedToken is a projected volume of a service-account token of the audience ("" for the API server's) and
// lifetime, beside the CA a token volume carries.
func projectedToken(audience string, seconds int64) corev1.VolumeSource {
	return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, ExpirationSeconds: &seconds, Path: "token"}},
	}}}
}

func TestTenantPodVolumesAreOfTheKindsRestrictedAllows(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	with := func(v corev1.VolumeSource) *corev1.Pod {
		return tenantPod(func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: v}} })
	}
	for _, tt := range []struct {
		name       string
		volume     corev1.VolumeSource
		wantDenied []string
	}{
		{"an NFS share, mounted from the node's network", corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.20.0.2", Path: "/vol1"}},
			[]string{"pod test has volumes v of a kind the node mounts with its own network and credentials"}},
		{"an iSCSI target", corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "10.20.0.3:3260", IQN: "iqn.2001-04.com.example:storage", Lun: 0}},
			[]string{"has volumes v of a kind the node mounts"}},
		{"another project's persistent disk by name", corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "team-b-data"}},
			[]string{"has volumes v"}},
		{"a git repository cloned on the node", corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Repository: "https://example.com/x.git"}},
			[]string{"has volumes v"}},
		{"a node binary's flex volume", corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "example.com/mount"}}, []string{"has volumes v"}},
		{"a Ceph block device", corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"10.20.0.4"}, RBDImage: "img"}}, []string{"has volumes v"}},
		{"a host path", corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/kubelet"}}, []string{"has volumes v"}},
		{"a ConfigMap", corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}}}, nil},
		{"a Secret", corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}, nil},
		{"scratch space", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, nil},
		{"the projected token vCluster writes", corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}, nil},
		{"the token the API server adds to every pod", projectedToken("", 3607), nil},
		{"a token for another system's audience", projectedToken("sts.amazonaws.com", 3607),
			[]string{"pod test has volumes v projecting a service-account token of an audience or lifetime of its own"}},
		{"a token of the shortest lifetime, which the node renews every 8 minutes", projectedToken("", 600),
			[]string{"has volumes v projecting a service-account token", "(its own audience, 3607 seconds)"}},
		{"the downward API", corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}, nil},
		{"a volume claim", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}, nil},
		{"a generic ephemeral volume", corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}, nil},
		{"an inline CSI volume", corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}}, nil},
		{"an image volume", corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example.com/weights:1"}}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, h.create(t, tenantNS, podGVK, podGVR, with(tt.volume)), tt.wantDenied)
		})
	}
	t.Run("whoever creates the pod", func(t *testing.T) {
		nfs := with(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.20.0.2", Path: "/"}})
		assertDenied(t, h.do(t, request{namespace: tenantNS, gvk: podGVK, gvr: podGVR, obj: nfs,
			user: "system:serviceaccount:kube-system:statefulset-controller"}), []string{"has volumes v"})
	})
}

func TestTenantEventsAreNoLargerThanTheEventsAPIAllows(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	event := func(edit func(*corev1.Event)) *corev1.Event {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "trainer.1", Namespace: tenantNS}, Reason: "Started", Message: "Started container main",
			Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "kubelet", Host: "gpu-a100-whole-0"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: tenantNS, Name: "trainer", FieldPath: "spec.containers{main}"}}
		if edit != nil {
			edit(e)
		}
		return e
	}
	newEvent := func(edit func(*eventsv1.Event)) *eventsv1.Event {
		e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "trainer.2", Namespace: tenantNS}, Reason: "Started", Note: "Started container main",
			Action: "Started", ReportingController: "example.com/trainer", ReportingInstance: "trainer-0", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: tenantNS, Name: "trainer"}}
		if edit != nil {
			edit(e)
		}
		return e
	}
	big := strings.Repeat("x", 1025)
	kubelet := "system:node:gpu-a100-whole-0"
	for _, tt := range []struct {
		name       string
		req        request
		wantDenied []string
	}{
		{"an event as Kubernetes' components write it", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR, obj: event(nil)}, nil},
		{"an event with the managed fields the API server records", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) {
				e.ManagedFields = []metav1.ManagedFieldsEntry{managedFields("v1", "vcluster", `{"f:count":{},"f:firstTimestamp":{},"f:involvedObject":{`+
					`"f:kind":{},"f:name":{},"f:namespace":{}},"f:message":{},"f:metadata":{"f:labels":{".":{},"f:app":{}},"f:ownerReferences":{".":{},`+
					`"k:{\"uid\":\"u\"}":{".":{},"f:uid":{}}}},"f:reason":{},"f:source":{"f:component":{}},"f:type":{}}`)}
			})}, nil},
		{"an event with managed fields of made-up paths", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) {
				e.ManagedFields = []metav1.ManagedFieldsEntry{managedFields("v1", "vcluster", `{"f:metadata":{"f:labels":{`+madeUpPaths(2000)+`}}}`)}
			})}, []string{"characters of field paths"}},
		{"an event with managed fields deeper than an event's", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) {
				e.ManagedFields = []metav1.ManagedFieldsEntry{managedFields("v1", "vcluster", `{"f:a":{"f:b":{"f:c":{"f:d":{`+madeUpPaths(3)+`}}}}}`)}
			})}, []string{"characters of field paths"}},
		{"an event of the events API", request{namespace: tenantNS, gvk: eventsV1GVK, gvr: eventsV1GVR, obj: newEvent(nil)}, nil},
		{"a message larger than a note may be", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) { e.Message = big })}, []string{"event trainer.1 is larger than an event may be"}},
		{"a long reason", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) { e.Reason = strings.Repeat("r", 129) })}, []string{"larger than an event may be"}},
		{"a long field path of the object it is about", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) { e.InvolvedObject.FieldPath = big })}, []string{"larger than an event may be"}},
		{"an event about an object of a long name", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) { e.InvolvedObject.Name = strings.Repeat("n", 253) })}, nil},
		{"an owner reference of a long name", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR, obj: event(func(e *corev1.Event) {
			e.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: big, UID: "u"}}
		})}, []string{"larger than an event may be"}},
		{"many finalizers", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR, obj: event(func(e *corev1.Event) {
			for i := range 100 {
				e.Finalizers = append(e.Finalizers, fmt.Sprintf("example.com/finalizer-%03d", i))
			}
		})}, []string{"larger than an event may be"}},
		{"a long name", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) { e.Name = big })}, []string{"larger than an event may be"}},
		{"large annotations", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) { e.Annotations = map[string]string{"a": big} })}, []string{"larger than an event may be"}},
		{"many labels", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR, obj: event(func(e *corev1.Event) {
			e.Labels = map[string]string{}
			for i := range 40 {
				e.Labels[fmt.Sprintf("label-%02d", i)] = strings.Repeat("v", 20)
			}
		})}, []string{"larger than an event may be"}},
		{"a long note through the events API", request{namespace: tenantNS, gvk: eventsV1GVK, gvr: eventsV1GVR,
			obj: newEvent(func(e *eventsv1.Event) { e.Note = big })}, []string{"event trainer.2 is larger"}},
		{"the kubelet's own event, which its identity vouches for", request{namespace: tenantNS, gvk: eventGVK, gvr: eventGVR,
			obj: event(func(e *corev1.Event) { e.Message = big }), user: kubelet}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) { assertDenied(t, h.do(t, tt.req), tt.wantDenied) })
	}
}

func TestNodesDoNotRelabelThemselvesIntoAPool(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cpu-0", Labels: labels}}
	}
	plain := node(map[string]string{"kubernetes.io/hostname": "cpu-0"})
	withLabel := func(k, v string) *corev1.Node {
		n := plain.DeepCopy()
		n.Labels[k] = v
		return n
	}
	kubelet := "system:node:cpu-0"
	for _, tt := range []struct {
		name       string
		req        request
		wantDenied []string
	}{
		{"the kubelet labels its node as the platform's", request{gvk: nodeGVK, gvr: nodeGVR, obj: withLabel(naming.PlatformPoolKey, "true"),
			old: plain, user: kubelet}, []string{"node cpu-0: system:node:cpu-0 may not change its labels " + naming.PlatformPoolKey}},
		{"the kubelet labels its node as a tenant's", request{gvk: nodeGVK, gvr: nodeGVR, obj: withLabel(naming.DedicatedNodeKey, "team-b"),
			old: plain, user: kubelet}, []string{naming.DedicatedNodeKey}},
		{"the kubelet hands its tenant's node to another", request{gvk: nodeGVK, gvr: nodeGVR, obj: node(map[string]string{naming.DedicatedNodeKey: "team-b"}),
			old: node(map[string]string{naming.DedicatedNodeKey: "team-a"}), user: kubelet}, []string{naming.DedicatedNodeKey}},
		{"the same through the status subresource", request{gvk: nodeGVK, gvr: nodeGVR, subresource: "status", obj: withLabel(naming.PlatformPoolKey, "true"),
			old: plain, user: kubelet}, []string{naming.PlatformPoolKey}},
		{"the kubelet updates another label of its node", request{gvk: nodeGVK, gvr: nodeGVR, obj: withLabel("topology.kubernetes.io/zone", "a"),
			old: plain, user: kubelet}, nil},
		{"the kubelet keeps its pool's label", request{gvk: nodeGVK, gvr: nodeGVR, obj: withLabel(naming.DedicatedNodeKey, "team-a"),
			old: withLabel(naming.DedicatedNodeKey, "team-a"), user: kubelet}, nil},
		{"the operator labels a node", request{gvk: nodeGVK, gvr: nodeGVR, obj: withLabel(naming.PlatformPoolKey, "true"), old: plain, user: "admin"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) { assertDenied(t, h.do(t, tt.req), tt.wantDenied) })
	}
}

var (
	nodeGVK          = corev1.SchemeGroupVersion.WithKind("Node")
	nodeGVR          = corev1.SchemeGroupVersion.WithResource("nodes")
	eventGVK         = corev1.SchemeGroupVersion.WithKind("Event")
	eventGVR         = corev1.SchemeGroupVersion.WithResource("events")
	eventsV1GVK      = eventsv1.SchemeGroupVersion.WithKind("Event")
	eventsV1GVR      = eventsv1.SchemeGroupVersion.WithResource("events")
	sliceGVK         = discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice")
	sliceGVR         = discoveryv1.SchemeGroupVersion.WithResource("endpointslices")
	endpointsGVK     = corev1.SchemeGroupVersion.WithKind("Endpoints")
	endpointsGVR     = corev1.SchemeGroupVersion.WithResource("endpoints")
	priorityClassGVK = schedulingv1.SchemeGroupVersion.WithKind("PriorityClass")
	priorityClassGVR = schedulingv1.SchemeGroupVersion.WithResource("priorityclasses")
	serviceGVK       = corev1.SchemeGroupVersion.WithKind("Service")
	serviceGVR       = corev1.SchemeGroupVersion.WithResource("services")
	pvcGVK           = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	pvcGVR           = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
)

// managedFields is one manager's entry as the API server records it, with its fields as JSON.
func managedFields(apiVersion, manager, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: apiVersion,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
}

func withManagedFields(entries ...metav1.ManagedFieldsEntry) func(*schedulingv1.PriorityClass) {
	return func(c *schedulingv1.PriorityClass) { c.ManagedFields = entries }
}

// madeUpPaths are n field paths of no field, as JSON members.
func madeUpPaths(n int) string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf(`"f:made-up-%06d":{}`, i)
	}
	return strings.Join(paths, ",")
}
