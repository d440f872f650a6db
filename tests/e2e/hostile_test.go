package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// attack is one thing a hostile tenant tries with its syncer's token. It is dry-run wherever the API allows, so a
// guard that failed would leave nothing behind; admission runs on dry-run requests as on real ones.
type attack struct {
	name string
	// guard is the ValidatingAdmissionPolicy that must refuse it; the API server names it in the refusal.
	guard   string
	message string
	try     func(ctx context.Context, as kubernetes.Interface, ns string) error
}

// gpuToleration is what vCluster adds to every pod it syncs, so a tenant's pods reach the GPU nodes.
var gpuToleration = corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// tenantPod is a pod that passes the restricted Pod Security Standard and tolerates the GPU taint, as a tenant's
// synced pods do, edited by edit.
func tenantPod(ns, name string, edit func(*corev1.Pod)) *corev1.Pod {
	p := plainPod(ns, name)
	p.Spec.Tolerations = []corev1.Toleration{gpuToleration}
	if edit != nil {
		edit(p)
	}
	return p
}

func createPod(edit func(*corev1.Pod)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) error {
		_, err := as.CoreV1().Pods(ns).Create(ctx, tenantPod(ns, "hostile", edit), dryRun)
		return err
	}
}

func withEnv(name, value string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: name, Value: value}} }
}

func withAnnotation(key string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{key: "nvidia.com/gpu=all"} }
}

// createEvent creates, as a dry run, an event in the namespace about a pod of it, as the kubelet would word it, edited.
func createEvent(edit func(*corev1.Event)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) error {
		e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "hostile.1", Namespace: ns}, Reason: "Started", Type: corev1.EventTypeNormal,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "trainer"}}
		edit(e)
		_, err := as.CoreV1().Events(ns).Create(ctx, e, dryRun)
		return err
	}
}

func withTolerations(ts ...corev1.Toleration) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

func createClaim(requests ...resourcev1.DeviceRequest) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) error {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: requests}}}
		_, err := as.ResourceV1().ResourceClaims(ns).Create(ctx, c, dryRun)
		return err
	}
}

func createService(edit func(*corev1.Service)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}
		edit(svc)
		_, err := as.CoreV1().Services(ns).Create(ctx, svc, dryRun)
		return err
	}
}

func createVolumeClaim(edit func(*corev1.PersistentVolumeClaim)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) error {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("1Gi")}}}}
		edit(pvc)
		_, err := as.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, dryRun)
		return err
	}
}

// madeUpManagedFields are one manager's managed fields naming 10,000 label paths of no label, about 300 KB, which
// the API server keeps as a client sends them.
func madeUpManagedFields(apiVersion string) []metav1.ManagedFieldsEntry {
	paths := make([]string, 10000)
	for i := range paths {
		paths[i] = fmt.Sprintf(`"f:made-up-%06d":{}`, i)
	}
	return []metav1.ManagedFieldsEntry{{Manager: "vcluster", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: apiVersion,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{` + strings.Join(paths, ",") + `}}}`)}}}
}

// deleteKubeconfigSecret deletes, as the tenant, the Secret its vCluster exports its kubeconfig in; the local stack's
// vClusters never start, so it is first written as vCluster would.
func deleteKubeconfigSecret(tenant string) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) error {
		done, err := withKubeconfigSecret(ctx, tenant, ns)
		if err != nil {
			return err
		}
		defer done()
		return as.CoreV1().Secrets(ns).Delete(ctx, naming.KubeconfigSecretPrefix+tenant, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}
}

// withKubeconfigSecret writes the tenant's kubeconfig Secret as vCluster does, unless it is there, and returns what
// removes it again if it was not.
func withKubeconfigSecret(ctx context.Context, tenant, ns string) (func(), error) {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: naming.KubeconfigSecretPrefix + tenant, Namespace: ns,
		Labels: map[string]string{"vcluster.loft.sh/created-by": "vcluster", "vcluster-name": tenant}},
		Data: map[string][]byte{"config": []byte("apiVersion: v1\nkind: Config\n")}}
	_, err := client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{})
	switch {
	case apierrors.IsAlreadyExists(err):
		return func() {}, nil
	case err != nil:
		return nil, err
	}
	return func() {
		_ = client.CoreV1().Secrets(ns).Delete(context.Background(), secret.Name, metav1.DeleteOptions{})
	}, nil
}

// withoutDefaultStorageClass runs try while the cluster has no default StorageClass, as an existing cluster may not: it
// takes the default mark off the simulated cluster's class, waits until the DefaultStorageClass admission plugin (which
// reads classes through an informer) leaves a claim of no class without one, and puts the mark back.
func withoutDefaultStorageClass(try func(context.Context, kubernetes.Interface, string) error) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) (err error) {
		mark := func(value string) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, simhw.IsDefaultClassAnnotation, value)
			_, err := client.StorageV1().StorageClasses().Patch(ctx, simhw.DefaultStorageClass, types.MergePatchType, []byte(patch),
				metav1.PatchOptions{})
			return err
		}
		if err := mark("false"); err != nil {
			return fmt.Errorf("unmarking the default class: %w", err)
		}
		defer func() {
			if markErr := mark("true"); markErr != nil {
				err = errors.Join(err, fmt.Errorf("marking the default class again: %w", markErr))
			}
		}()
		probe := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-class-probe", Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("1Gi")}}}}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			got, err := client.CoreV1().PersistentVolumeClaims("default").Create(ctx, probe, dryRun)
			if err != nil {
				return fmt.Errorf("probing the default class: %w", err)
			}
			if got.Spec.StorageClassName == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the API server still gives claims the default class %s", *got.Spec.StorageClassName)
			}
		}
		return try(ctx, as, ns)
	}
}

// createClaimSpec creates a claim whose spec edit writes.
func createClaimSpec(edit func(*resourcev1.ResourceClaimSpec)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, ns string) error {
		c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns}}
		edit(&c.Spec)
		_, err := as.ResourceV1().ResourceClaims(ns).Create(ctx, c, dryRun)
		return err
	}
}

// createPriorityClass creates, as the tenant's vCluster would copy a virtual class named hostile, a PriorityClass of
// the tenant's own vCluster, changed by edit.
func createPriorityClass(tenant string, edit func(*schedulingv1.PriorityClass)) func(context.Context, kubernetes.Interface, string) error {
	return func(ctx context.Context, as kubernetes.Interface, _ string) error {
		marker := "vcluster-" + tenant + "-x-" + tenant
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "vcluster-hostile-x-" + marker,
			Labels:      map[string]string{naming.VClusterManagedByLabel: marker},
			Annotations: map[string]string{"vcluster.loft.sh/object-name": "hostile"}}}
		edit(pc)
		_, err := as.SchedulingV1().PriorityClasses().Create(ctx, pc, dryRun)
		return err
	}
}

// tolerating is a request of the tenant's granted class that tolerates a device taint, directly or in firstAvailable.
func tolerating(class string, first bool, toleration resourcev1.DeviceToleration) resourcev1.DeviceRequest {
	if first {
		return resourcev1.DeviceRequest{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "any", DeviceClassName: class,
			AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1, Tolerations: []resourcev1.DeviceToleration{toleration}}}}
	}
	return resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class,
		Tolerations: []resourcev1.DeviceToleration{toleration}}}
}

// attacksOn are the vectors of docs/threat-model.md that admission refuses, against a tenant granted class.
func attacksOn(tenant, class string) []attack {
	return append(attacksAtEveryLevel(tenant, class), volumeAttacks(tenant)...)
}

// withVolume gives the pod one volume of the source.
func withVolume(v corev1.VolumeSource) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Volumes = []corev1.Volume{{Name: "loot", VolumeSource: v}} }
}

// projectedToken is a projected volume of a service-account token of the audience ("" for the API server's) and
// lifetime.
func projectedToken(audience string, seconds int64) corev1.VolumeSource {
	return corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: audience, ExpirationSeconds: &seconds, Path: "token"}},
	}}}
}

// volumeAttacks are the volumes the node mounts from its own network with its own credentials. Pod Security's
// restricted level refuses them too, before the policies run, so the guard is what refuses them at baseline only.
func volumeAttacks(tenant string) []attack {
	if tenantLevels[tenant] != "baseline" {
		return nil
	}
	const refused = "of a kind the node mounts with its own network and credentials"
	return []attack{
		{"another tenant's NFS share, mounted from the node's network", tenancy.PodVolumeTypesPolicy, "volumes loot " + refused,
			createPod(withVolume(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "10.20.0.2", Path: "/team-b"}}))},
		{"an iSCSI target", tenancy.PodVolumeTypesPolicy, refused, createPod(withVolume(corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{
			TargetPortal: "10.20.0.3:3260", IQN: "iqn.2001-04.com.example:storage", Lun: 0, FSType: "ext4"}}))},
		{"a persistent disk attached by name", tenancy.PodVolumeTypesPolicy, refused,
			createPod(withVolume(corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{PDName: "team-b-data"}}))},
		{"a git repository cloned on the node", tenancy.PodVolumeTypesPolicy, refused,
			createPod(withVolume(corev1.VolumeSource{GitRepo: &corev1.GitRepoVolumeSource{Repository: "https://example.com/x.git"}}))},
		{"a CephFS share", tenancy.PodVolumeTypesPolicy, refused,
			createPod(withVolume(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"10.20.0.4:6789"}}}))},
	}
}

// markedClaim is a claim of the tenant's own class marked as one the scheduler made for a pod, sent raw through one
// version of resource.k8s.io, each with its own request shape.
func markedClaim(version, class string) attack {
	request := map[string]string{
		"v1":      `{"name":"gpu","exactly":{"deviceClassName":%q}}`,
		"v1beta2": `{"name":"gpu","exactly":{"deviceClassName":%q}}`,
		"v1beta1": `{"name":"gpu","deviceClassName":%q,"allocationMode":"ExactCount","count":1}`,
	}[version]
	return attack{"a claim marked as one the scheduler made for a pod, through " + version, tenancy.ExtendedResourceClaimPolicy,
		"may set or change " + tenancy.ExtendedResourceClaimAnnotation, func(ctx context.Context, as kubernetes.Interface, ns string) error {
			body := fmt.Sprintf(`{"apiVersion":"resource.k8s.io/%s","kind":"ResourceClaim","metadata":{"name":"hostile-%s",`+
				`"annotations":{%q:"true"}},"spec":{"devices":{"requests":[`+request+`]}}}`,
				version, version, tenancy.ExtendedResourceClaimAnnotation, class)
			return as.CoreV1().RESTClient().Post().AbsPath("/apis/resource.k8s.io", version, "namespaces", ns, "resourceclaims").
				Param("dryRun", "All").Body([]byte(body)).Do(ctx).Error()
		}}
}

func attacksAtEveryLevel(tenant, class string) []attack {
	everyDeviceTaint := resourcev1.DeviceToleration{Operator: resourcev1.DeviceTolerationOpExists}
	faulty := resourcev1.DeviceToleration{Key: "gpu.nvidia.com/xid", Operator: resourcev1.DeviceTolerationOpExists}
	other := map[string]string{legal: research, research: legal}[tenant]
	otherClass := map[string]string{legal: slice, research: whole}[tenant]
	const ownToken = "projecting a service-account token of an audience or lifetime of its own"
	return []attack{
		{"the NVIDIA runtime class", tenancy.NodeDevicePolicy, "RuntimeClass nvidia is not one tenants may use",
			createPod(func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("nvidia") })},
		{"a service-account token for another system's audience, which the node requests", tenancy.PodVolumeTypesPolicy, ownToken,
			createPod(withVolume(projectedToken("sts.amazonaws.com", 3607)))},
		{"a service-account token the node renews every 8 minutes", tenancy.PodVolumeTypesPolicy, ownToken,
			createPod(withVolume(projectedToken("", 600)))},
		{"CUDA_VERSION, which makes a legacy image take every GPU", tenancy.RuntimeEnvPolicy, "set NVIDIA runtime variables",
			createPod(withEnv("CUDA_VERSION", "12.4.1"))},
		{"IMEX channels", tenancy.RuntimeEnvPolicy, "set NVIDIA runtime variables", createPod(withEnv("NVIDIA_IMEX_CHANNELS", "0"))},
		{"GPUDirect Storage devices", tenancy.RuntimeEnvPolicy, "set NVIDIA runtime variables", createPod(withEnv("NVIDIA_GDS", "enabled"))},
		{"every GPU by variable", tenancy.RuntimeEnvPolicy, "set NVIDIA runtime variables", createPod(withEnv("NVIDIA_VISIBLE_DEVICES", "all"))},
		{"another tenant's class by its name", tenancy.ExtendedResourcePolicy,
			"is not granted " + tenancy.DefaultExtendedResourceName(otherClass) + " (DeviceClass " + otherClass + ")",
			createPod(func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{
					corev1.ResourceName(tenancy.DefaultExtendedResourceName(otherClass)): apiresource.MustParse("1")}
			})},
		markedClaim("v1", class), markedClaim("v1beta2", class), markedClaim("v1beta1", class),
		{"CDI devices by annotation", tenancy.NodeDevicePolicy, "annotations cdi.k8s.io/hostile", createPod(withAnnotation("cdi.k8s.io/hostile"))},
		{"CDI devices through the NRI plugin", tenancy.NodeDevicePolicy, "annotations nvidia.cdi.k8s.io/pod", createPod(withAnnotation("nvidia.cdi.k8s.io/pod"))},
		{"CRI-O devices by annotation", tenancy.NodeDevicePolicy, "devices.crio.io", createPod(withAnnotation("devices.crio.io"))},
		{"the toolkit's device-list mount", tenancy.NodeDevicePolicy, "device-list path", createPod(func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/var/run/nvidia-container-devices/all"}}
		})},
		{"a toleration of every taint", tenancy.PodPlacementPolicy, "tolerates taints (every taint)",
			createPod(withTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists}))},
		{"the nodes dedicated to another tenant", tenancy.PodPlacementPolicy, naming.DedicatedNodeKey + "=" + other,
			createPod(withTolerations(corev1.Toleration{Key: naming.DedicatedNodeKey, Operator: corev1.TolerationOpEqual, Value: other,
				Effect: corev1.TaintEffectNoSchedule}))},
		{"the nodes dedicated to another tenant, any effect", tenancy.PodPlacementPolicy, naming.DedicatedNodeKey + "=" + other,
			createPod(withTolerations(corev1.Toleration{Key: naming.DedicatedNodeKey, Value: other}))},
		{"the nodes dedicated to every tenant", tenancy.PodPlacementPolicy, naming.DedicatedNodeKey + " (every tenant)",
			createPod(withTolerations(corev1.Toleration{Key: naming.DedicatedNodeKey, Operator: corev1.TolerationOpExists}))},
		{"the platform's own pool", tenancy.PodPlacementPolicy, "tolerates taints " + naming.PlatformPoolKey,
			createPod(withTolerations(corev1.Toleration{Key: naming.PlatformPoolKey, Operator: corev1.TolerationOpEqual, Value: "true",
				Effect: corev1.TaintEffectNoSchedule}))},
		{"the platform's own pool, any value", tenancy.PodPlacementPolicy, "tolerates taints " + naming.PlatformPoolKey,
			createPod(withTolerations(corev1.Toleration{Key: naming.PlatformPoolKey, Operator: corev1.TolerationOpExists}))},
		{"nodes under maintenance", tenancy.PodPlacementPolicy, tenancy.MaintenanceTaint,
			createPod(withTolerations(corev1.Toleration{Key: tenancy.MaintenanceTaint, Operator: corev1.TolerationOpExists}))},
		{"a node picked past the scheduler", tenancy.PodPlacementPolicy, "names node gpu-a100-whole-0",
			createPod(func(p *corev1.Pod) { p.Spec.NodeName = "gpu-a100-whole-0" })},
		{"another scheduler", tenancy.PodPlacementPolicy, "asks for scheduler",
			createPod(func(p *corev1.Pod) { p.Spec.SchedulerName = "lenient" })},
		{"system-node-critical priority", tenancy.PodPlacementPolicy, "has priority 2000001000 (PriorityClass system-node-critical)",
			createPod(func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" })},
		{"a priority class above the tenants' band", tenancy.PriorityClassPolicy, "may have a value of at most 0",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) { pc.Value = 1000 })},
		{"a default priority class for the whole cluster", tenancy.PriorityClassPolicy, "may not be the cluster's default",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) { pc.GlobalDefault = true })},
		{"another tenant's PriorityClass name, taken first with its own label", tenancy.PriorityClassPolicy, "its own vCluster",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) { pc.Name = "vcluster-hostile-x-vcluster-" + other + "-x-" + other })},
		{"another tenant's PriorityClass name, its virtual name chosen to match", tenancy.PriorityClassPolicy, "its own vCluster",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) {
				pc.Name = "vcluster-hostile-x-vcluster-" + other + "-x-" + other
				pc.Annotations["vcluster.loft.sh/object-name"] = "hostile-x-vcluster-" + other + "-x-" + other
			})},
		{"a PriorityClass of a megabyte of description, which no quota counts", tenancy.PriorityClassPolicy, "characters of description",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) { pc.Description = strings.Repeat("d", 1<<20) })},
		{"a PriorityClass of large annotations", tenancy.PriorityClassPolicy, "of labels and annotations",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) { pc.Annotations["filler"] = strings.Repeat("a", 200<<10) })},
		{"a PriorityClass of 300 KB of made-up managed fields, which the API server keeps", tenancy.PriorityClassPolicy, "managed fields only of the fields, labels and annotations it has",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) { pc.ManagedFields = madeUpManagedFields("scheduling.k8s.io/v1") })},
		{"a PriorityClass kept by a finalizer", tenancy.PriorityClassPolicy, "may carry no finalizers",
			createPriorityClass(tenant, func(pc *schedulingv1.PriorityClass) { pc.Finalizers = []string{"example.com/keep"} })},
		{"the kubeconfig Secret the platform reads deleted", tenancy.KubeconfigSecretPolicy, "may not delete Secret " + naming.KubeconfigSecretPrefix + tenant,
			deleteKubeconfigSecret(tenant)},
		{"anti-affinity against every namespace's pods", tenancy.PodPlacementPolicy, "reach other namespaces",
			createPod(func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: "kubernetes.io/hostname", NamespaceSelector: &metav1.LabelSelector{}, LabelSelector: &metav1.LabelSelector{}}}}}
			})},
		{"the driver's sharing configuration in a claim", tenancy.ClaimShapePolicy, "carries device configuration",
			createClaimSpec(func(s *resourcev1.ResourceClaimSpec) {
				s.Devices.Requests = []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}}
				s.Devices.Config = []resourcev1.DeviceClaimConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
					Driver: "gpu.nvidia.com", Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing"}}`)}}}}}
			})},
		{"every matching device", tenancy.ClaimShapePolicy, "allocationMode All",
			createClaim(resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class,
				AllocationMode: resourcev1.DeviceAllocationModeAll}})},
		{"an EndpointSlice programmed a thousand times", tenancy.EndpointsPolicy, "101 endpoint addresses",
			func(ctx context.Context, as kubernetes.Interface, ns string) error {
				s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns}, AddressType: discoveryv1.AddressTypeIPv4,
					Ports: []discoveryv1.EndpointPort{{Port: ptr.To(int32(80))}}}
				for i := range 101 {
					s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.9.%d.%d", i/200, i%200+1)}})
				}
				_, err := as.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, dryRun)
				return err
			}},
		{"an EndpointSlice of two endpoints with many addresses", tenancy.EndpointsPolicy, "102 endpoint addresses",
			func(ctx context.Context, as kubernetes.Interface, ns string) error {
				// An endpoint holds at most 100 addresses (validation); two of 51 hold more than a slice may.
				s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "hostile", Namespace: ns}, AddressType: discoveryv1.AddressTypeIPv4,
					Ports: []discoveryv1.EndpointPort{{Port: ptr.To(int32(80))}}, Endpoints: make([]discoveryv1.Endpoint, 2)}
				for i := range 102 {
					s.Endpoints[i%2].Addresses = append(s.Endpoints[i%2].Addresses, fmt.Sprintf("10.8.%d.%d", i/200, i%200+1))
				}
				_, err := as.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, dryRun)
				return err
			}},
		{"an event of a megabyte, through the core API without eventTime", tenancy.EventSizePolicy, "is larger than an event may be",
			createEvent(func(e *corev1.Event) { e.Message = strings.Repeat("x", 1<<20) })},
		{"an event of 300 KB of made-up managed fields, which the API server keeps", tenancy.EventSizePolicy, "characters of field paths",
			createEvent(func(e *corev1.Event) { e.ManagedFields = madeUpManagedFields("v1") })},
		{"an event whose annotations fill etcd", tenancy.EventSizePolicy, "is larger than an event may be",
			createEvent(func(e *corev1.Event) { e.Annotations = map[string]string{"fill": strings.Repeat("x", 200<<10)} })},
		{"a Service of many ports", tenancy.ServicePolicy, "ports; a tenant Service may have at most 10",
			createService(func(s *corev1.Service) {
				s.Spec.Ports = nil
				for i := range 11 {
					s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: fmt.Sprintf("p%d", i), Port: int32(8000 + i)})
				}
			})},
		{"a volume claim of the empty class", tenancy.VolumeClaimPolicy, "empty storage class",
			createVolumeClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("") })},
		{"a volume claim of no class, where the cluster has no default class", tenancy.VolumeClaimPolicy, "names no storage class",
			withoutDefaultStorageClass(createVolumeClaim(func(*corev1.PersistentVolumeClaim) {}))},
		{"a volume claim of the empty class in its older spelling", tenancy.VolumeClaimPolicy, "empty storage class",
			createVolumeClaim(func(c *corev1.PersistentVolumeClaim) {
				c.Annotations = map[string]string{"volume.beta.kubernetes.io/storage-class": ""}
			})},
		{"a pod without a grace period", tenancy.GracefulDeletePolicy, "terminationGracePeriodSeconds must be at least 1",
			createPod(func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To(int64(0)) })},
		{"externalIPs", tenancy.ServicePolicy, "sets externalIPs 203.0.113.10",
			createService(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"203.0.113.10"} })},
		{"a claim on an existing volume", tenancy.VolumeClaimPolicy, "names volume",
			createVolumeClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "someone-elses" })},
		{"every device taint tolerated", naming.EntitlementPolicy, "tolerate device taints",
			createClaim(tolerating(class, false, everyDeviceTaint))},
		{"a faulty device's taint tolerated through firstAvailable", naming.EntitlementPolicy, "tolerate device taints",
			createClaim(tolerating(class, true, faulty))},
	}
}

// checkHostileTenant: every vector refused, as the syncer's own token, in a tenant namespace of each Pod Security
// level, by the guard that names it; and the legitimate neighbours still admitted.
// nvidiaRuntimeClass creates the RuntimeClass the GPU Operator creates on Kapsule, for the test's duration: with it
// present, a refusal can only be the guard's, not the RuntimeClass admission plugin's.
func nvidiaRuntimeClass(t *testing.T, ctx context.Context) {
	_, err := client.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "nvidia"}, Handler: "nvidia"},
		metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.NodeV1().RuntimeClasses().Delete(context.Background(), "nvidia", metav1.DeleteOptions{})
	})
}

func checkHostileTenant(t *testing.T, ctx context.Context) {
	nvidiaRuntimeClass(t, ctx)

	for tenant, class := range map[string]string{legal: whole, research: slice} {
		ns := naming.Namespace(tenant)
		syncer, _ := syncerOf(t, ctx, tenant)
		t.Run(tenant+" ("+tenantLevels[tenant]+")", func(t *testing.T) {
			for _, a := range attacksOn(tenant, class) {
				t.Run(a.name, func(t *testing.T) {
					requireDenied(t, a.try(ctx, syncer, ns), a.guard, a.message)
				})
			}
			t.Run("the neighbours are admitted", func(t *testing.T) {
				_, err := syncer.CoreV1().Pods(ns).Create(ctx, tenantPod(ns, "neighbour", nil), dryRun)
				assert.NoError(t, err, "a plain pod with the GPU taint's toleration")
				_, err = syncer.CoreV1().Pods(ns).Create(ctx, tenantPod(ns, "void", withEnv("NVIDIA_VISIBLE_DEVICES", tenancy.NoDevices)), dryRun)
				assert.NoError(t, err, "a pod that asks for no GPU at all")
				assert.NoError(t, createService(func(*corev1.Service) {})(ctx, syncer, ns), "a ClusterIP service")
				// legal-ai holds its whole quota by now: a claim of its class may be refused by the quota, never by a policy.
				err = createClaim(resourcev1.DeviceRequest{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}})(ctx, syncer, ns)
				if err != nil {
					assert.Contains(t, err.Error(), "exceeded quota: "+naming.TenantQuota, "a claim of the granted class")
				}
				assert.NoError(t, createVolumeClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.StorageClassName = ptr.To("standard") })(ctx, syncer, ns),
					"a claim on a new volume")
			})
			t.Run("shared capacity is capped by the quota", func(t *testing.T) { checkSharedCapacityQuota(t, ctx, syncer, ns) })
			t.Run("endpoints may not point at link-local addresses", func(t *testing.T) { checkEndpointAddresses(t, ctx, syncer, ns) })
			t.Run("externalIPs may not be added to a Service later", func(t *testing.T) {
				svc, err := syncer.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
					Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{})
				require.NoError(t, err)
				t.Cleanup(func() {
					_ = client.CoreV1().Services(ns).Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
				})
				err = rawPatch(ctx, syncer, types.MergePatchType, "/api/v1/namespaces/"+ns+"/services/web", `{"spec":{"externalIPs":["203.0.113.10"]}}`)
				requireDenied(t, err, tenancy.ServicePolicy)
			})
		})
	}
}

// checkSharedCapacityQuota: a tenant cannot take the shared capacity through Services, node ports or load balancers,
// and a container asking for nothing still costs the minimum.
func checkSharedCapacityQuota(t *testing.T, ctx context.Context, as kubernetes.Interface, ns string) {
	for _, tc := range []struct {
		name, key string
		edit      func(*corev1.Service)
	}{
		{"a load balancer", "services.loadbalancers", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer }},
		{"a node port", "services.nodeports", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := createService(tc.edit)(ctx, as, ns)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "exceeded quota: "+naming.TenantQuota)
			assert.Contains(t, err.Error(), tc.key)
		})
	}
	t.Run("a container that asks for no CPU", func(t *testing.T) {
		_, err := as.CoreV1().Pods(ns).Create(ctx, tenantPod(ns, "free", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("0")}
		}), dryRun)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "minimum cpu usage per Container is 10m")
	})
	quota, err := client.CoreV1().ResourceQuotas(ns).Get(ctx, naming.TenantQuota, metav1.GetOptions{})
	require.NoError(t, err)
	for key := range tenancy.ObjectQuotaKeys {
		assert.Contains(t, quota.Spec.Hard, corev1.ResourceName(key), "object count %s", key)
	}
}

// checkEndpointAddresses: a selector-less Service's endpoints are the tenant's to write, but the API server refuses
// link-local addresses, the cloud metadata endpoints among them (kubernetes v1.34.4 pkg/apis/core/validation
// ValidateEndpointIP), so no tenant Service can route its callers to a node's credentials.
func checkEndpointAddresses(t *testing.T, ctx context.Context, as kubernetes.Interface, ns string) {
	ep := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "metadata", Namespace: ns},
		Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "169.254.169.254"}}, Ports: []corev1.EndpointPort{{Port: 80}}}}}
	_, err := as.CoreV1().Endpoints(ns).Create(ctx, ep, dryRun)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
	assert.Contains(t, err.Error(), "link-local")
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "metadata", Namespace: ns}, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"169.254.169.254"}}}}
	_, err = as.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, dryRun)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "%v", err)
}

const fillerLabel = "gpu-tenancy.test/filler"

// checkObjectCountQuota: pods and empty claims, which cost no device, run into the tenant's object counts
// (research-ai's are set low in stacks/Pulumi.local.yaml).
func checkObjectCountQuota(t *testing.T, ctx context.Context) {
	ns := naming.Namespace(research)
	syncer, _ := syncerOf(t, ctx, research)
	for _, tc := range []struct {
		key    corev1.ResourceName
		create func(i int) error
		clean  func() error
	}{
		{"pods", func(i int) error {
			p := plainPod(ns, fmt.Sprintf("filler-%d", i))
			p.Labels = map[string]string{fillerLabel: "true"}
			_, err := syncer.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		}, func() error {
			return client.CoreV1().Pods(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))},
				metav1.ListOptions{LabelSelector: fillerLabel})
		}},
		{"count/resourceclaims.resource.k8s.io", func(i int) error {
			c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("empty-%d", i), Namespace: ns}}
			_, err := syncer.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{})
			return err
		}, func() error {
			for i := 0; i < 50; i++ {
				_ = client.ResourceV1().ResourceClaims(ns).Delete(context.Background(), fmt.Sprintf("empty-%d", i), metav1.DeleteOptions{})
			}
			return nil
		}},
	} {
		t.Run(string(tc.key), func(t *testing.T) {
			t.Cleanup(func() { _ = tc.clean() })
			var err error
			created := 0
			// The quota's usage catches up with each create before the next, so the refusal comes at the limit.
			for ; created < 50; created++ {
				if err = tc.create(created); err != nil {
					break
				}
			}
			require.Error(t, err, "%d objects created and no quota refused them", created)
			assert.Contains(t, err.Error(), "exceeded quota: "+naming.TenantQuota)
			assert.Contains(t, err.Error(), string(tc.key))
			t.Logf("%s: refused after %d more", tc.key, created)
		})
	}
}

// checkClaimRelease: a tenant cannot make the platform believe a device is free while a container may still hold it.
// Each attempt is a raw request, as the syncer's token would send it without reading first, on a claim the real
// scheduler allocated to a pod it bound.
func checkClaimRelease(t *testing.T, ctx context.Context) {
	holders := map[string]string{legal: "whole-a", research: "slice-a"}
	for tenant, podName := range holders {
		ns := naming.Namespace(tenant)
		syncer, user := syncerOf(t, ctx, tenant)
		t.Run(tenant, func(t *testing.T) {
			pod, err := client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			require.NoError(t, err)
			require.NotEmpty(t, pod.Spec.NodeName, "the scheduler bound the holder")
			claimName := probe.ClaimOf(pod)
			require.NotEmpty(t, claimName)
			claim, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
			require.NoError(t, err)
			require.NotNil(t, claim.Status.Allocation, "the claim is allocated")
			require.Contains(t, claim.Finalizers, tenancy.DeleteProtectionFinalizer)

			claimPath := "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + claimName
			podPath := "/api/v1/namespaces/" + ns + "/pods/" + podName
			for _, a := range []struct {
				name, guard string
				try         func() error
			}{
				{"the delete protection stripped by JSON patch", tenancy.ClaimDeleteProtectionPolicy, func() error {
					return rawPatch(ctx, syncer, types.JSONPatchType, claimPath, `[{"op":"remove","path":"/metadata/finalizers"}]`)
				}},
				{"the delete protection stripped by merge patch", tenancy.ClaimDeleteProtectionPolicy, func() error {
					return rawPatch(ctx, syncer, types.MergePatchType, claimPath, `{"metadata":{"finalizers":null}}`)
				}},
				{"the holder's phase forged", tenancy.PodPhasePolicy, func() error {
					return rawPatch(ctx, syncer, types.MergePatchType, podPath+"/status", `{"status":{"phase":"Failed"}}`)
				}},
				{"a resize of the holder forged", tenancy.PodPhasePolicy, func() error {
					return rawPatch(ctx, syncer, types.StrategicMergePatchType, podPath+"/status", resizePending)
				}},
				{"the holder's claim statuses forged", tenancy.PodPhasePolicy, func() error {
					return rawPatch(ctx, syncer, types.MergePatchType, podPath+"/status",
						`{"status":{"resourceClaimStatuses":[{"name":"gpu","resourceClaimName":"someone-elses"}]}}`)
				}},
				{"the holder force-deleted", tenancy.GracefulDeletePolicy, func() error {
					return syncer.CoreV1().RESTClient().Delete().AbsPath(podPath).Param("dryRun", "All").
						Body([]byte(`{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}`)).Do(ctx).Error()
				}},
			} {
				t.Run(a.name, func(t *testing.T) { requireDenied(t, a.try(), a.guard, user) })
			}
			// pods/resize (the chart grants it from Kubernetes 1.35): the API server takes only containers' CPU and
			// memory from it, refuses any resize of a container that names a claim (kubernetes v1.36.3
			// pkg/apis/core/validation/validation.go dropCPUMemoryResourcesFromContainer keeps no claims before it
			// compares), and the quota counts the resize (docs/threat-model.md, the syncer's rights).
			resize := func(pod *corev1.Pod, resources string) error {
				return rawPatch(ctx, syncer, types.StrategicMergePatchType, "/api/v1/namespaces/"+ns+"/pods/"+pod.Name+"/resize",
					`{"spec":{"containers":[{"name":"`+pod.Spec.Containers[0].Name+`","resources":`+resources+`}]}}`)
			}
			t.Run("a resize of the holder", func(t *testing.T) {
				requireDenied(t, resize(pod, `{"requests":{"memory":"80Mi"}}`), "only cpu and memory resources are mutable")
			})
			t.Run("a resize that adds a device resource", func(t *testing.T) {
				requireDenied(t, resize(pod, `{"requests":{"nvidia.com/gpu":"1"},"limits":{"nvidia.com/gpu":"1"}}`),
					"only cpu and memory resources are mutable")
			})
			t.Run("a resize beyond the quota", func(t *testing.T) {
				controlPlane, err := client.CoreV1().Pods(ns).Get(ctx, tenant+"-0", metav1.GetOptions{})
				require.NoError(t, err, "the tenant's vCluster pod, which names no claim")
				requireDenied(t, resize(controlPlane, `{"requests":{"memory":"64Gi"},"limits":{"memory":"128Gi"}}`),
					"exceeded quota: "+naming.TenantQuota)
			})
			// A pod that asks for an extended resource and waits behind a scheduling gate, so the scheduler gives it
			// no claim: the status that would point it at the holder's allocated claim, which the kubelet would then
			// prepare for it, is the scheduler's to write. (The API server takes a mapping only of a resource the
			// container requests; a name no DeviceClass maps keeps the tenant's device quota, full here, out of it.)
			t.Run("a waiting pod pointed at the holder's claim", func(t *testing.T) {
				const name = "example.com/widget"
				waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "by-name-gated", Namespace: ns},
					Spec: *pod.Spec.DeepCopy()}
				waiting.Spec.NodeName, waiting.Spec.ResourceClaims = "", nil
				waiting.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "gpu-tenancy.io/e2e-hold"}}
				waiting.Spec.Containers = waiting.Spec.Containers[:1]
				waiting.Spec.Containers[0].Resources = corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceName(name): apiresource.MustParse("1")}}
				waiting.Spec.InitContainers, waiting.Spec.EphemeralContainers = nil, nil
				_, err := client.CoreV1().Pods(ns).Create(ctx, waiting, metav1.CreateOptions{})
				require.NoError(t, err)
				t.Cleanup(func() {
					_ = client.CoreV1().Pods(ns).Delete(context.Background(), waiting.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
				})
				forged := fmt.Sprintf(`{"status":{"extendedResourceClaimStatus":{"requestMappings":[{"containerName":%q,`+
					`"resourceName":%q,"requestName":"container-0-request-0"}],"resourceClaimName":%q}}}`,
					waiting.Spec.Containers[0].Name, name, claimName)
				requireDenied(t, rawPatch(ctx, syncer, types.MergePatchType, "/api/v1/namespaces/"+ns+"/pods/"+waiting.Name+"/status", forged),
					tenancy.PodPhasePolicy, user)
			})
			t.Run("a graceful delete is admitted", func(t *testing.T) {
				err := syncer.CoreV1().Pods(ns).Delete(ctx, podName, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll},
					GracePeriodSeconds: ptr.To(int64(30))})
				assert.NoError(t, err)
			})
			after, err := client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, claim.Status, after.Status, "the claim is still allocated and reserved")
			assert.Contains(t, after.Finalizers, tenancy.DeleteProtectionFinalizer)
		})
	}
}

func resourceQuantity(s string) apiresource.Quantity { return apiresource.MustParse(s) }

// rawPatch sends a patch without reading the object first.
func rawPatch(ctx context.Context, as kubernetes.Interface, pt types.PatchType, path, body string) error {
	return as.CoreV1().RESTClient().Patch(pt).AbsPath(path).Param("dryRun", "All").Body([]byte(body)).Do(ctx).Error()
}

// nodeKubelet is a client that acts as node's kubelet: the user system:node:<node> in group system:nodes, with the
// rights of the bootstrap ClusterRole system:node (which a cluster with the Node authorizer grants its nodes), as a
// tenant who took that node's credentials would hold them. The admin impersonates it.
func nodeKubelet(t *testing.T, ctx context.Context, node string) kubernetes.Interface {
	t.Helper()
	user := "system:node:" + node
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-kubelet-" + node},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
	if _, err := client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	cs, err := impersonating(user, "system:nodes", "system:authenticated")
	require.NoError(t, err)
	return cs
}

// grant gives the service account user one more cluster-wide rule until the test ends, as an operator's broader grant
// would, and waits until the authorizer has it.
func grant(t *testing.T, ctx context.Context, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	name := "e2e-grant-" + strings.ReplaceAll(user, ":", "-")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{rule}}
	_, err := client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	parts := strings.Split(user, ":")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: parts[2], Name: parts[3]}}}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	attrs := authorizationv1.ResourceAttributes{Verb: rule.Verbs[0], Group: rule.APIGroups[0]}
	attrs.Resource, attrs.Subresource, _ = strings.Cut(rule.Resources[0], "/")
	eventually(t, ctx, func() error {
		if !allowed(t, ctx, user, attrs) {
			return errorf("the authorizer does not have the grant to %s yet", user)
		}
		return nil
	})
}

// serverMinor is the local control plane's Kubernetes minor version.
func serverMinor(t *testing.T) int {
	t.Helper()
	v, err := client.Discovery().ServerVersion()
	require.NoError(t, err)
	minor, err := strconv.Atoi(strings.TrimSuffix(v.Minor, "+"))
	require.NoError(t, err, "the server's minor version %q", v.Minor)
	return minor
}

// impersonating is a client of the admin's that acts as user in groups.
func impersonating(user string, groups ...string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return kubernetes.NewForConfig(cfg)
}

// resizePending is a pod status patch that says a resize waits, with which the scheduler and the quota count the
// container statuses' resources instead of the spec's.
const resizePending = `{"status":{"conditions":[{"type":"PodResizePending","status":"True","reason":"Infeasible"}]}}`

// backstops are the refusals of a second layer that holds a vector without its guard too (defence in depth), by the
// attack's name: without the guard, the attempt must meet its backstop instead of being admitted.
var backstops = map[string]string{
	// The quota counts a claim of every matching device as the most a claim may hold, 32 devices
	// (k8s: pkg/quota/v1/evaluator/core/resource_claims.go, AllocationResultsMaxSize), above research-ai's quota.
	"every matching device": "exceeded quota: " + naming.TenantQuota,
}

// checkEachGuardIsWhatRefuses removes one guard's binding at a time and sees the attack it stops admitted, then puts
// the binding back: each refusal above is that guard's, and would not happen without it.
func checkEachGuardIsWhatRefuses(t *testing.T, ctx context.Context) {
	nvidiaRuntimeClass(t, ctx)
	// research-ai has room in its device quota, so a claim the entitlement policy would refuse is admitted without it.
	syncer, _ := syncerOf(t, ctx, research)
	ns := naming.Namespace(research)
	// Every variant of every vector, not one per guard: a variant that another guard or layer also refuses would be
	// no evidence that this guard is what holds it.
	byGuard := map[string][]attack{}
	for _, a := range attacksOn(research, slice) {
		byGuard[a.guard] = append(byGuard[a.guard], a)
	}
	holder, err := client.CoreV1().Pods(ns).Get(ctx, "slice-a", metav1.GetOptions{})
	require.NoError(t, err)
	claimPath := "/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" + probe.ClaimOf(holder)
	podPath := "/api/v1/namespaces/" + ns + "/pods/slice-a"
	patch := func(pt types.PatchType, path, body string) func(context.Context, kubernetes.Interface, string) error {
		return func(ctx context.Context, as kubernetes.Interface, _ string) error {
			return rawPatch(ctx, as, pt, path, body)
		}
	}
	kubelet := nodeKubelet(t, ctx, simNodes()[0])
	relabel := func(key, value string) func(context.Context, kubernetes.Interface, string) error {
		return func(ctx context.Context, _ kubernetes.Interface, _ string) error {
			return rawPatch(ctx, kubelet, types.MergePatchType, "/api/v1/nodes/"+simNodes()[0],
				fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value))
		}
	}
	for _, a := range []attack{
		{name: "a node's kubelet labels it as the platform's", guard: tenancy.NodeLabelPolicy, try: relabel(naming.PlatformPoolKey, "true")},
		{name: "a node's kubelet labels it as another tenant's", guard: tenancy.NodeLabelPolicy, try: relabel(naming.DedicatedNodeKey, legal)},
		{name: "the delete protection stripped", guard: tenancy.ClaimDeleteProtectionPolicy,
			try: patch(types.MergePatchType, claimPath, `{"metadata":{"finalizers":null}}`)},
		{name: "a terminal phase forged", guard: tenancy.PodPhasePolicy, try: patch(types.MergePatchType, podPath+"/status", `{"status":{"phase":"Failed"}}`)},
		{name: "a resize forged", guard: tenancy.PodPhasePolicy, try: patch(types.StrategicMergePatchType, podPath+"/status", resizePending)},
		// The status subresource takes metadata as sent, and Pod Security does not look at it.
		{name: "an annotation added through status", guard: tenancy.PodPhasePolicy,
			try: patch(types.MergePatchType, podPath+"/status", `{"metadata":{"annotations":{"example.com/runtime-hint":"x"}}}`)},
		{name: "a pod relabelled through status", guard: tenancy.PodPhasePolicy,
			try: patch(types.MergePatchType, podPath+"/status", `{"metadata":{"labels":{"app":"posing"}}}`)},
		{name: "a finalizer added through status", guard: tenancy.PodPhasePolicy,
			try: patch(types.JSONPatchType, podPath+"/status", `[{"op":"add","path":"/metadata/finalizers","value":["example.com/keep"]}]`)},
	} {
		byGuard[a.guard] = append(byGuard[a.guard], a)
	}
	for guard, attacks := range byGuard {
		t.Run(guard, func(t *testing.T) {
			for _, a := range attacks {
				requireDenied(t, a.try(ctx, syncer, ns), guard)
			}
			bindings := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
			saved, err := bindings.Get(ctx, guard, metav1.GetOptions{})
			require.NoError(t, err)
			require.NoError(t, bindings.Delete(ctx, guard, metav1.DeleteOptions{}))
			restore := func() {
				b := saved.DeepCopy()
				b.ObjectMeta = metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels, Annotations: saved.Annotations}
				_, err := bindings.Create(context.Background(), b, metav1.CreateOptions{})
				if !apierrors.IsAlreadyExists(err) {
					require.NoError(t, err)
				}
			}
			defer restore()
			within(t, ctx, 20*time.Second, func() error {
				for _, a := range attacks {
					err := a.try(ctx, syncer, ns)
					if backstop := backstops[a.name]; backstop != "" {
						if err == nil || !strings.Contains(err.Error(), backstop) || strings.Contains(err.Error(), guard) {
							return errorf("%s without %s: want only its backstop (%s), got %v", a.name, guard, backstop, err)
						}
						continue
					}
					if err != nil {
						return errorf("%s still refused without %s: %v", a.name, guard, err)
					}
				}
				return nil
			})
			restore()
			within(t, ctx, 20*time.Second, func() error {
				for _, a := range attacks {
					if err := a.try(ctx, syncer, ns); err == nil || !strings.Contains(err.Error(), guard) {
						return errorf("%s not refused by %s again: %v", a.name, guard, err)
					}
				}
				return nil
			})
		})
	}
}

// checkPlatformKeys: each tenant's vCluster has its own platform access key, which no other tenant's syncer can read,
// as the vCluster chart's own RBAC renders for the program's values (SubjectAccessReview for every syncer against every
// key Secret).
func checkPlatformKeys(t *testing.T, ctx context.Context, keys map[string]string) {
	tenants := []string{legal, research}
	for _, owner := range tenants {
		secret, err := client.CoreV1().Secrets(naming.Namespace(owner)).Get(ctx, "vcluster-platform-api-key", metav1.GetOptions{})
		require.NoError(t, err, "tenant %s has its key", owner)
		assert.Equal(t, keys[owner], string(secret.Data["accessKey"]))
		assert.Equal(t, owner, string(secret.Data["name"]), "the key belongs to the platform's instance of the tenant")
		for _, reader := range tenants {
			user := "system:serviceaccount:" + naming.Namespace(reader) + ":vc-" + reader
			for _, verb := range []string{"get", "list", "watch"} {
				got := allowed(t, ctx, user, authorizationv1.ResourceAttributes{Namespace: naming.Namespace(owner), Verb: verb,
					Resource: "secrets", Name: secret.Name})
				assert.Equal(t, reader == owner, got, "%s %s the key of %s", user, verb, owner)
			}
		}
	}
	assert.False(t, allowed(t, ctx, "system:serviceaccount:"+naming.Namespace(legal)+":vc-"+legal, authorizationv1.ResourceAttributes{
		Namespace: naming.PlatformNamespace, Verb: "get", Resource: "secrets"}), "no tenant reads anything in the platform's namespace")
}
