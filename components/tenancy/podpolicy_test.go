package tenancy

import (
	"testing"

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
		{"cordoned nodes", tolerating(corev1.Toleration{Key: "node.kubernetes.io/unschedulable", Operator: corev1.TolerationOpExists}),
			[]string{"node.kubernetes.io/unschedulable"}},
		{"a quarantine taint", tolerating(corev1.Toleration{Key: "example.com/quarantine", Value: "x", Effect: corev1.TaintEffectNoExecute}),
			[]string{"example.com/quarantine"}},
		{"a node picked at creation", func(p *corev1.Pod) { p.Spec.NodeName = "gpu-a100-whole-0" },
			[]string{"pod test names node gpu-a100-whole-0"}},
		{"another scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = "lenient" }, []string{"asks for scheduler lenient"}},
		{"the default scheduler", func(p *corev1.Pod) { p.Spec.SchedulerName = DefaultScheduler }, nil},
		{"a critical priority class", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" },
			[]string{"asks for PriorityClass system-node-critical; tenant pods may use tenant-batch"}},
		{"a listed priority class", func(p *corev1.Pod) { p.Spec.PriorityClassName = "tenant-batch" }, nil},
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
		{"the kubelet ends the pod", statusUpdate(kubelet, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), nil},
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
}

func TestVolumeClaimsDoNotBindExistingVolumes(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	pvc := func(edit func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: tenantNS}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	assert.Empty(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(nil)))
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-of-team-b" })),
		[]string{"PersistentVolumeClaim data names volume pv-of-team-b"})
	assertDenied(t, h.create(t, tenantNS, pvcGVK, pvcGVR, pvc(func(c *corev1.PersistentVolumeClaim) {
		c.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	})), []string{"selects existing volumes by label"})
	bound := pvc(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv-1" })
	assertDenied(t, h.admit(t, tenantNS, pvcGVK, pvcGVR, bound, pvc(nil)), []string{"names volume pv-1"})
	binder := request{namespace: tenantNS, gvk: pvcGVK, gvr: pvcGVR, obj: bound, old: pvc(nil),
		user: "system:serviceaccount:kube-system:persistent-volume-binder"}
	assert.Empty(t, h.do(t, binder), "the persistent-volume controller binds")
}

var (
	serviceGVK = corev1.SchemeGroupVersion.WithKind("Service")
	serviceGVR = corev1.SchemeGroupVersion.WithResource("services")
	pvcGVK     = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	pvcGVR     = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
)
