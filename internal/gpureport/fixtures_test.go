package gpureport

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// Hand-built objects shaped like the platform's and the NVIDIA DRA driver's (internal/sim/README.md).

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// The catalog's selectors exactly as components/tenancy GPUClass.CEL writes them for the local stack.
const (
	wholeCEL = `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu' && ` +
		`device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('(^|[^a-z0-9])a100([^a-z0-9]|$)')`
	sliceCEL = `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig' && ` +
		`device.attributes['gpu.nvidia.com'].profile == '1g.5gb' && ` +
		`device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('(^|[^a-z0-9])a100([^a-z0-9]|$)')`
)

func str(s string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &s} }

func wholeGPU(name, uuid string) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type": str("gpu"), "uuid": str(uuid), "productName": str("NVIDIA A100-SXM4-40GB"),
	}}
}

func migDevice(name, parentUUID, profile string) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type": str("mig"), "uuid": str("MIG-" + name), "parentUUID": str(parentUUID), "profile": str(profile),
		"productName": str("NVIDIA A100-SXM4-40GB"),
	}}
}

// consumes makes a device a partition of counter set set, drawing memory from it (KEP-4815).
func consumes(d resourcev1.Device, set, memory string) resourcev1.Device {
	d.ConsumesCounters = []resourcev1.DeviceCounterConsumption{{
		CounterSet: set, Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse(memory)}},
	}}
	return d
}

func counterSet(name, memory string) resourcev1.CounterSet {
	return resourcev1.CounterSet{Name: name, Counters: map[string]resourcev1.Counter{"memory": {Value: resource.MustParse(memory)}}}
}

// nodeSlice is a driver slice for one node; its pool is named after the node, as the NVIDIA driver does.
func nodeSlice(node string, generation int64, devices ...resourcev1.Device) resourcev1.ResourceSlice {
	return resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-gpu.nvidia.com-g%d", node, generation)},
		Spec: resourcev1.ResourceSliceSpec{
			Driver: naming.Driver, NodeName: ptr.To(node),
			Pool:    resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1},
			Devices: devices,
		},
	}
}

func migDevices(parentUUID string, n int) []resourcev1.Device {
	var out []resourcev1.Device
	for i := range n {
		out = append(out, migDevice(fmt.Sprintf("gpu-0-mig-1g5gb-19-%d", i), parentUUID, "1g.5gb"))
	}
	return out
}

// simulatedSlices is internal/sim/simhw/hardware: two nodes with a whole A100 each, one node with seven 1g.5gb devices.
func simulatedSlices() []resourcev1.ResourceSlice {
	return []resourcev1.ResourceSlice{
		nodeSlice("gpu-a100-whole-0", 1, wholeGPU("gpu-0", "GPU-1")),
		nodeSlice("gpu-a100-whole-1", 1, wholeGPU("gpu-0", "GPU-2")),
		nodeSlice("gpu-a100-mig-0", 1, migDevices("GPU-3", 7)...),
	}
}

func deviceClass(name, cel string, tenants ...string) resourcev1.DeviceClass {
	labels := map[string]string{naming.ManagedByLabel: naming.ManagedBy}
	for _, t := range tenants {
		labels[naming.ClassTenantLabel(t)] = "true"
	}
	return resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: cel}}}},
	}
}

func tenantNamespace(tenant string, classes ...string) corev1.Namespace {
	labels := map[string]string{
		naming.TenantNamespaceLabel: tenant, naming.ManagedByLabel: naming.ManagedBy,
		naming.PodSecurityEnforceLabel: "baseline", naming.GrantsLabel: "true",
	}
	for _, c := range classes {
		labels[naming.ClassGrantLabel(c)] = "true"
	}
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: naming.Namespace(tenant), Labels: labels}}
}

func claim(namespace, name string, created time.Time, classes ...string) resourcev1.ResourceClaim {
	req := resourcev1.DeviceRequest{Name: "gpu"}
	if len(classes) == 1 {
		req.Exactly = &resourcev1.ExactDeviceRequest{DeviceClassName: classes[0], AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}
	} else {
		for i, c := range classes {
			req.FirstAvailable = append(req.FirstAvailable, resourcev1.DeviceSubRequest{
				Name: fmt.Sprintf("option-%d", i), DeviceClassName: c, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
			})
		}
	}
	return resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, CreationTimestamp: metav1.NewTime(created)},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{req}}},
	}
}

// allocate records an allocation of one device for request ("gpu" or "gpu/option-N").
func allocate(c resourcev1.ResourceClaim, request, pool, device string) resourcev1.ResourceClaim {
	c.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{
		Results: []resourcev1.DeviceRequestAllocationResult{{Request: request, Driver: naming.Driver, Pool: pool, Device: device}},
	}}
	return c
}

func quota(namespace string, hard, used map[string]int64) corev1.ResourceQuota {
	list := func(m map[string]int64) corev1.ResourceList {
		out := corev1.ResourceList{}
		for k, v := range m {
			out[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
		}
		return out
	}
	return corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: naming.TenantQuota},
		Spec:       corev1.ResourceQuotaSpec{Hard: list(hard)},
		Status:     corev1.ResourceQuotaStatus{Hard: list(hard), Used: list(used)},
	}
}

func limitRange(namespace string) corev1.LimitRange {
	return corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: naming.ContainerDefaults}}
}

// entitlement is the one entitlement policy every tenant's claims go through, and its binding.
func entitlement() (admissionv1.ValidatingAdmissionPolicy, admissionv1.ValidatingAdmissionPolicyBinding) {
	name := naming.EntitlementPolicy
	return admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}},
		admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			},
		}
}

// pod is a pod using a claim by name (claimName) or through a template (template).
func pod(namespace, name string, created time.Time, claimName, template string) corev1.Pod {
	pc := corev1.PodResourceClaim{Name: "gpu"}
	if claimName != "" {
		pc.ResourceClaimName = &claimName
	} else {
		pc.ResourceClaimTemplateName = &template
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{pc}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// podAsking is a pod that asks for count devices of a class by an extended-resource name, and uses no claim.
func podAsking(namespace, name string, created time.Time, resourceName, count string) corev1.Pod {
	p := pod(namespace, name, created, "", "")
	p.Spec.ResourceClaims = nil
	p.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceName(resourceName): resource.MustParse(count)}}}}
	return p
}

func unschedulable(p corev1.Pod, message string) corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: message,
	})
	return p
}

// generated records in the pod's status the claim the resource claim controller created from its template.
func generated(p corev1.Pod, claimName string) corev1.Pod {
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claimName}}
	return p
}

func claimTemplate(namespace, name, class string) resourcev1.ResourceClaimTemplate {
	c := claim(namespace, name, now, class)
	return resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       resourcev1.ResourceClaimTemplateSpec{Spec: c.Spec},
	}
}

// failedCreation is the resource claim controller's event about a pod whose claim it could not create, as its
// recorder writes it (kubernetes v1.34.4 pkg/controller/resourceclaim/controller.go: source component resource_claim).
func failedCreation(p corev1.Pod, message string) corev1.Event {
	return corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name + ".1"},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID,
		},
		Reason: "FailedResourceClaimCreation", Message: message, Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: "resource_claim"}, LastTimestamp: metav1.NewTime(now.Add(-time.Minute)),
	}
}

// configSecret is a vCluster's config Secret as the vCluster chart renders it (loft-sh/vcluster v0.36.1
// chart/templates/config-secret.yaml): vc-config-<release>, labelled app=vcluster, the chart's effective values as
// YAML under config.yaml, here a few of the defaults around the given DeviceClass sync (omitted when nil).
func configSecret(t *testing.T, namespace, release string, deviceClasses map[string]any) corev1.Secret {
	t.Helper()
	fromHost := map[string]any{"nodes": map[string]any{"enabled": false}, "runtimeClasses": map[string]any{"enabled": false}}
	if deviceClasses != nil {
		fromHost["deviceClasses"] = deviceClasses
	}
	values := map[string]any{
		"sync": map[string]any{
			"fromHost": fromHost,
			"toHost":   map[string]any{"pods": map[string]any{"enabled": true}, "resourceClaims": map[string]any{"enabled": true}},
		},
		"controlPlane": map[string]any{"statefulSet": map[string]any{"image": map[string]any{"tag": "0.36.1"}}},
	}
	raw, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	return corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: ConfigSecretPrefix + release,
			Labels: map[string]string{"app": "vcluster", "chart": "vcluster-0.36.1", "release": release, "heritage": "Helm"},
		},
		Type: corev1.SecretTypeOpaque,
		// Helm's toYaml cuts the encoder's trailing newline.
		Data: map[string][]byte{ConfigSecretKey: bytes.TrimSuffix(raw, []byte("\n"))},
	}
}

// controlPlane is the StatefulSet the vCluster chart renders with config, its pod template pinning the config's hash:
// the hex SHA-256 of the base64 of config.yaml, which for configs without privateNodes.autoNodes, such as
// configSecret's, is the chart's whole hash input (chart/templates/_vclusterconfighash.tpl).
func controlPlane(config corev1.Secret) appsv1.StatefulSet {
	release := strings.TrimPrefix(config.Name, ConfigSecretPrefix)
	sum := sha256.Sum256([]byte(base64.StdEncoding.EncodeToString(config.Data[ConfigSecretKey])))
	return appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: config.Namespace, Name: release,
			Labels: map[string]string{"app": "vcluster", "chart": "vcluster-0.36.1", "release": release, "heritage": "Helm"}},
		Spec: appsv1.StatefulSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{ConfigHashAnnotation: hex.EncodeToString(sum[:])},
		}}},
	}
}

// rerender replaces the i-th vCluster's config and StatefulSet as the chart renders both from values whose
// DeviceClass sync is deviceClasses: the platform's own change, pinned as the chart pins it.
func rerender(t *testing.T, s *Snapshot, i int, deviceClasses map[string]any) {
	t.Helper()
	old := s.VClusterConfigs[i]
	s.VClusterConfigs[i] = configSecret(t, old.Namespace, strings.TrimPrefix(old.Name, ConfigSecretPrefix), deviceClasses)
	s.VClusterStatefulSets[i] = controlPlane(s.VClusterConfigs[i])
}

func tenantSelector(tenant string) map[string]any {
	return map[string]any{"enabled": true, "selector": map[string]any{"matchLabels": map[string]any{naming.ClassTenantLabel(tenant): "true"}}}
}
