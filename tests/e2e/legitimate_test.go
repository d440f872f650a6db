package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The objects a tenant's vCluster (loft-sh/vcluster v0.36.1) writes to its host namespace, in the shapes its translator
// produces for ordinary workloads, and the workloads GPU users run. Each is sent as the tenant's syncer, dry-run, under
// the tenant's Pod Security level, and must be admitted: a guard that refuses one of them is a defect of the same weight
// as one that admits an attack. Source paths are of the vCluster tree at v0.36.1 (vc:) and Kubernetes v1.34.4 (k8s:).
// ResourceClaims and ResourceClaimTemplates are synced by vCluster's closed Pro build: their shapes follow its mappers
// (vc:pkg/mappings/resources/resourceclaims.go, resourceclaimtemplates.go: HostNameShort names, the class name kept
// by the DeviceClass mirror mapper) and the common syncer pattern, not code that could be read.

// simNodes names the simulated GPU nodes: the nodes a tenant's pods can use.
func simNodes() []string {
	hw, err := simhw.Load()
	if err != nil {
		panic(err)
	}
	var out []string
	for _, n := range hw.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// legitimate is one such object and how to send it.
type legitimate struct {
	name string
	// source is where its shape comes from.
	source string
	send   func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error
}

// vcMeta is the metadata vCluster gives a synced object: its host name, its markers and the virtual object's name
// (vc:pkg/util/translate/translate.go HostMetadata, labels.go).
func vcMeta(tenant, ns, virtualNS, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: name + "-x-" + virtualNS + "-x-" + tenant, Namespace: ns,
		Labels: map[string]string{naming.VClusterManagedByLabel: tenant, "vcluster.loft.sh/namespace": virtualNS},
		Annotations: map[string]string{
			"vcluster.loft.sh/object-name": name, "vcluster.loft.sh/object-namespace": virtualNS,
			"vcluster.loft.sh/object-host-name": name + "-x-" + virtualNS + "-x-" + tenant, "vcluster.loft.sh/object-host-namespace": ns,
		},
	}
}

// syncedPod is a virtual pod as vCluster writes it to the host: its own service account, no token mount, the
// virtual token in an annotation, projected through the downward API, the virtual cluster's DNS and Service
// variables, the GPU pools' toleration, its virtual namespace's labels and the vCluster Service as an owner
// (vc:pkg/controllers/resources/pods/translate/translator.go). Its shape is the running syncer's: tests/nodes runs a
// pod through each tenant's vCluster on real nodes, and this follows what that syncer wrote to the host.
func syncedPod(tenant, ns, virtualNS, name string, restricted bool) *corev1.Pod {
	meta := vcMeta(tenant, ns, virtualNS, name)
	meta.Labels["app"] = name
	// The virtual namespace's labels, each under a key of its hash (vc:pkg/util/translate/single_namespace.go
	// HostLabelNamespace); a tenant's virtual namespaces carry its Pod Security level.
	level := tenantLevels[tenant]
	for key, value := range map[string]string{"kubernetes.io/metadata.name": virtualNS, "pod-security.kubernetes.io/enforce": level,
		"pod-security.kubernetes.io/enforce-version": "latest", "pod-security.kubernetes.io/warn": level,
		"pod-security.kubernetes.io/warn-version": "latest"} {
		digest := sha256.Sum256([]byte(key))
		meta.Labels["vcluster.loft.sh/ns-label-"+tenant+"-x-"+hex.EncodeToString(digest[:])[:10]] = value
	}
	const uid = "7031a7e1-4617-43a4-b04a-114c2d59c9e5"
	for key, value := range map[string]string{"vcluster.loft.sh/token-a1b2c3d4": "eyJhbGciOiJSUzI1NiJ9.e30.signature",
		"cluster-autoscaler.kubernetes.io/safe-to-evict": "false", "vcluster.loft.sh/name": name,
		"vcluster.loft.sh/namespace": virtualNS, "vcluster.loft.sh/uid": uid, "vcluster.loft.sh/object-uid": uid,
		"vcluster.loft.sh/object-kind": "/v1, Kind=Pod", "vcluster.loft.sh/service-account-name": "default",
		"vcluster.loft.sh/labels": `app="` + name + `"`} {
		meta.Annotations[key] = value
	}
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: tenant,
		UID: "79262368-ad11-4b73-a54c-3faa045edb52", Controller: ptr.To(false)}}
	token := corev1.Volume{Name: "kube-api-access-x1y2z", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "token", Mode: ptr.To(int32(0o644)),
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['vcluster.loft.sh/token-a1b2c3d4']"}}}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt-x-" + virtualNS + "-x-" + tenant},
				Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace",
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['vcluster.loft.sh/namespace']"}}}}},
		}}}}
	env := []corev1.EnvVar{{Name: "KUBERNETES_PORT", Value: "tcp://10.0.0.10:443"}, {Name: "KUBERNETES_PORT_443_TCP", Value: "tcp://10.0.0.10:443"},
		{Name: "KUBERNETES_PORT_443_TCP_ADDR", Value: "10.0.0.10"}, {Name: "KUBERNETES_PORT_443_TCP_PORT", Value: "443"},
		{Name: "KUBERNETES_PORT_443_TCP_PROTO", Value: "tcp"}, {Name: "KUBERNETES_SERVICE_HOST", Value: "10.0.0.10"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "443"}, {Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: "443"},
		{Name: "MY_POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['vcluster.loft.sh/name']"}}}}
	p := &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{
		ServiceAccountName: "vc-workload-" + tenant, DeprecatedServiceAccount: "vc-workload-" + tenant,
		AutomountServiceAccountToken: ptr.To(false), EnableServiceLinks: ptr.To(false), Priority: ptr.To(int32(0)),
		HostAliases: []corev1.HostAlias{{IP: "10.0.0.10", Hostnames: []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"}}},
		Hostname: name, DNSPolicy: corev1.DNSNone, DNSConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.53"},
			Searches: []string{virtualNS + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
			Options:  []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("5")}}},
		Containers: []corev1.Container{{Name: "main", Image: "registry.example.com/team/train:1.0",
			Env:          env,
			VolumeMounts: []corev1.VolumeMount{{Name: token.Name, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("500m"),
				corev1.ResourceMemory: resourceQuantity("512Mi")}},
		}},
		Volumes: []corev1.Volume{token},
		Tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
			// The GPU pools' taint as the platform has the vCluster enforce it (components/vcluster/virtualcluster.go, sync.toHost.pods.enforceTolerations).
			{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule},
		},
		TerminationGracePeriodSeconds: ptr.To(int64(30)), SchedulerName: "default-scheduler",
		PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
	}}
	if restricted {
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(1000)),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	}
	return p
}

func createPodAs(edit func(p *corev1.Pod, tenant string)) func(context.Context, kubernetes.Interface, string, string) error {
	return func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
		p := syncedPod(tenant, ns, "default", "trainer", tenantLevels[tenant] == "restricted")
		edit(p, tenant)
		_, err := as.CoreV1().Pods(ns).Create(ctx, p, dryRun)
		return err
	}
}

// legitimateFor are the objects of one tenant, granted class, as its vCluster and its users would send them.
func legitimateFor(class string) []legitimate {
	return []legitimate{
		{"the control plane's pod, from the live StatefulSet template", "vc:chart/templates/statefulset.yaml, created by the StatefulSet controller",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				sts, err := client.AppsV1().StatefulSets(ns).Get(ctx, tenant, metav1.GetOptions{})
				if err != nil {
					return err
				}
				p := &corev1.Pod{ObjectMeta: *sts.Spec.Template.ObjectMeta.DeepCopy(), Spec: *sts.Spec.Template.Spec.DeepCopy()}
				// The second replica's pod: the first exists already.
				p.Name, p.Namespace = tenant+"-1", ns
				p.Labels["statefulset.kubernetes.io/pod-name"] = tenant + "-1"
				p.Spec.Hostname, p.Spec.Subdomain = tenant+"-1", tenant+"-headless"
				for _, c := range sts.Spec.VolumeClaimTemplates {
					p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + tenant + "-1"}}})
				}
				_, err = as.CoreV1().Pods(ns).Create(ctx, p, dryRun)
				return err
			}},
		{"CoreDNS", "vc:pkg/coredns/template.go, pkg/controllers/resources/pods/translate/translator.go", func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
			p := syncedPod(tenant, ns, "kube-system", "coredns-6d4b75cb6d-abcde", false)
			p.Labels["k8s-app"] = "vcluster-kube-dns"
			p.Annotations["vcluster.loft.sh/owner-set-kind"] = "ReplicaSet"
			p.Spec.DNSPolicy, p.Spec.DNSConfig = corev1.DNSDefault, nil
			p.Spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
					"k8s-app": "vcluster-kube-dns", "vcluster.loft.sh/namespace": "kube-system", naming.VClusterManagedByLabel: tenant}}}}
			uid := int64(12345)
			if tenantLevels[tenant] != "restricted" {
				uid = 1001
			}
			p.Spec.Containers[0] = corev1.Container{Name: "coredns", Image: "docker.io/coredns/coredns:1.14.2", Args: []string{"-conf", "/etc/coredns/Corefile"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("1"), corev1.ResourceMemory: resourceQuantity("170Mi")},
					Requests: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("20m"), corev1.ResourceMemory: resourceQuantity("64Mi")}},
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &uid, RunAsGroup: &uid,
					AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: p.Spec.Containers[0].VolumeMounts}
			_, err := as.CoreV1().Pods(ns).Create(ctx, p, dryRun)
			return err
		}},
		{"a pod with a claim and a projected token", "vc:pkg/controllers/resources/pods/translate/translator.go (resourceClaims renamed, token annotation)",
			createPodAs(func(p *corev1.Pod, _ string) {
				p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("v0a1b2c3d4e5f6")}}
				p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
			})},
		{"a Job's pod that requests more memory than the default limit and sets none", "vc:pkg/controllers/resources/pods/translate/translator.go (resources copied as written); k8s:plugin/pkg/admission/limitranger",
			createPodAs(func(p *corev1.Pod, _ string) {
				p.Labels["batch.kubernetes.io/job-name"] = "train"
				p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resourceQuantity("2"), corev1.ResourceMemory: resourceQuantity("16Gi")}}
			})},
		{"a DaemonSet's pod with the tolerations the DaemonSet controller adds", "vc:pkg/controllers/resources/pods/translate/translator.go (tolerations and owner-set-kind annotation); k8s:pkg/controller/daemon/util/daemonset_util.go",
			createPodAs(func(p *corev1.Pod, _ string) {
				p.Annotations["vcluster.loft.sh/owner-set-kind"] = "DaemonSet"
				p.Spec.Tolerations = []corev1.Toleration{gpuToleration}
				for _, key := range []string{"not-ready", "unreachable"} {
					p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/" + key,
						Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})
				}
				for _, key := range []string{"disk-pressure", "memory-pressure", "pid-pressure", "unschedulable"} {
					p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "node.kubernetes.io/" + key,
						Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
				}
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name",
						Operator: corev1.NodeSelectorOpIn, Values: []string{simNodes()[0]}}}}}}}}
			})},
		{"a pod of a tenant with pools of its own, as its vCluster writes it", "vc:pkg/controllers/resources/pods/syncer.go (sync.fromHost.nodes.selector.labels as the node selector), pkg/util/toleration/toleration.go (enforceTolerations key=value:Effect is an Equal toleration)",
			createPodAs(func(p *corev1.Pod, tenant string) {
				p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: naming.DedicatedNodeKey, Operator: corev1.TolerationOpEqual,
					Value: tenant, Effect: corev1.TaintEffectNoSchedule})
				p.Spec.NodeSelector = map[string]string{naming.DedicatedNodeKey: tenant}
			})},
		{"a pod whose virtual class does not preempt", "vc:pkg/controllers/resources/priorityclasses/translate.go, pods/translate/translator.go",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				marker := "vcluster-" + tenant + "-x-" + tenant
				class := "vcluster-batch-x-" + marker
				// As vCluster copies a class applied with kubectl in the virtual cluster, with the longest description allowed:
				// the virtual class's annotations and its own (pkg/util/translate/translate.go HostMetadata).
				description := strings.Repeat("d", tenancy.MaxPriorityClassDescription)
				pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class, Labels: map[string]string{naming.VClusterManagedByLabel: marker},
					Annotations: map[string]string{"vcluster.loft.sh/object-name": "batch", "vcluster.loft.sh/object-uid": "0b6f3c2e-4a8e-4f2a-9d1e-6c1f0e2b7a55",
						"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"scheduling.k8s.io/v1","description":"` + description +
							`","kind":"PriorityClass","metadata":{"annotations":{},"name":"batch"},"preemptionPolicy":"Never","value":0}`,
						"vcluster.loft.sh/managed-annotations": "kubectl.kubernetes.io/last-applied-configuration"}},
					Value: 0, PreemptionPolicy: ptr.To(corev1.PreemptNever), Description: description}
				// The class must exist for the pod: created as the syncer, then removed.
				if _, err := as.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("the class: %w", err)
				}
				defer func() {
					_ = client.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
				}()
				return createPodAs(func(p *corev1.Pod, _ string) {
					p.Spec.PriorityClassName, p.Spec.PreemptionPolicy = class, ptr.To(corev1.PreemptNever)
				})(ctx, as, tenant, ns)
			}},
		{"same-namespace affinity and topology spread", "vc:pkg/controllers/resources/pods/translate/translator.go translatePodAffinityTerm",
			createPodAs(func(p *corev1.Pod, tenant string) {
				sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "vcluster.loft.sh/namespace": "default",
					naming.VClusterManagedByLabel: tenant}}
				p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: sel, TopologyKey: "kubernetes.io/hostname"}}}}
				p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname",
					WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: sel}}
			})},
		{"a pod whose image is pulled every time", "vc:pkg/controllers/resources/pods/translate/translator.go (containers copied as written)", createPodAs(func(p *corev1.Pod, _ string) {
			p.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
		})},
		{"the StatefulSet pod's hosts rewrite init container", "vc:pkg/controllers/resources/pods/translate/hosts.go",
			createPodAs(func(p *corev1.Pod, _ string) {
				p.Annotations["vcluster.loft.sh/hosts-rewritten"] = "true"
				p.Spec.Subdomain = "db"
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "vcluster-rewrite-hosts", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
				p.Spec.InitContainers = []corev1.Container{{Name: "vcluster-rewrite-hosts", Image: "mirror.gcr.io/library/alpine:3.20",
					Command: []string{"sh"}, Args: []string{"-c", "sed -E -e 's/^(\\d+.\\d+.\\d+.\\d+\\s+)db-0$/\\1 db-0.db.default.svc.cluster.local db-0/' /etc/hosts > /hosts/hosts"},
					SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(int64(12345)), RunAsGroup: ptr.To(int64(12345)), RunAsNonRoot: ptr.To(true),
						AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("30m"), corev1.ResourceMemory: resourceQuantity("64Mi")},
						Requests: corev1.ResourceList{corev1.ResourceCPU: resourceQuantity("30m"), corev1.ResourceMemory: resourceQuantity("64Mi")}},
					VolumeMounts: []corev1.VolumeMount{{Name: "vcluster-rewrite-hosts", MountPath: "/hosts"}}}}
			})},
		{"a Service", "vc:pkg/controllers/resources/services/translate.go", func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
			svc := &corev1.Service{ObjectMeta: vcMeta(tenant, ns, "default", "trainer"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP,
				Selector: map[string]string{"app": "trainer", naming.VClusterManagedByLabel: tenant, "vcluster.loft.sh/namespace": "default"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
			_, err := as.CoreV1().Services(ns).Create(ctx, svc, dryRun)
			return err
		}},
		{"a kubelet Service for each node the tenant's pods use", "vc:pkg/controllers/resources/nodes/nodeservice/node_service.go",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				for _, node := range simNodes() {
					svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: tenant + "-node-" + strings.ReplaceAll(node, ".", "-"), Namespace: ns,
						Labels: map[string]string{"vcluster.loft.sh/belongs-to": tenant, "vcluster.loft.sh/node": node}},
						Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "vcluster", "release": tenant},
							Ports: []corev1.ServicePort{{Name: "kubelet", Port: 10250, TargetPort: intstr.FromInt32(8443)}}}}
					if _, err := as.CoreV1().Services(ns).Create(ctx, svc, dryRun); err != nil {
						return fmt.Errorf("node %s: %w", node, err)
					}
				}
				return nil
			}},
		{"the service-CIDR probe Service", "vc:pkg/util/servicecidr/servicecidr.go", func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-service-delete-me-", Namespace: ns},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, ClusterIP: "10.0.0.200",
					IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack), IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}}}
			_, err := as.CoreV1().Services(ns).Create(ctx, svc, dryRun)
			return err
		}},
		{"a selector-less Service's Endpoints and EndpointSlice", "vc:pkg/controllers/resources/endpoints/translate.go, endpointslices/translate.go",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				meta := vcMeta(tenant, ns, "default", "ext-db")
				ep := &corev1.Endpoints{ObjectMeta: meta, Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: "10.20.30.40"}},
					Ports: []corev1.EndpointPort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}}}}
				if _, err := as.CoreV1().Endpoints(ns).Create(ctx, ep, dryRun); err != nil {
					return err
				}
				slice := &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: discoveryv1.AddressTypeIPv4,
					Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.20.30.40"}}},
					Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To(int32(5432))}}}
				slice.Labels = map[string]string{discoveryv1.LabelServiceName: meta.Name, naming.VClusterManagedByLabel: tenant}
				if _, err := as.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, dryRun); err != nil {
					return err
				}
				// While the Service selects no pod its slice is a placeholder whose endpoints and ports arrive as null.
				empty := slice.DeepCopy()
				empty.Endpoints, empty.Ports = nil, nil
				_, err := as.DiscoveryV1().EndpointSlices(ns).Create(ctx, empty, dryRun)
				return err
			}},
		{"the virtual cluster's root CA and a referenced ConfigMap", "vc:pkg/mappings/resources/configmaps.go",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				for _, cm := range []*corev1.ConfigMap{
					{ObjectMeta: metav1.ObjectMeta{Name: "vcluster-kube-root-ca.crt-x-" + tenant, Namespace: ns}, Data: map[string]string{"ca.crt": "-----BEGIN CERTIFICATE-----"}},
					{ObjectMeta: vcMeta(tenant, ns, "default", "train-config"), Data: map[string]string{"EPOCHS": "10"}},
				} {
					if _, err := as.CoreV1().ConfigMaps(ns).Create(ctx, cm, dryRun); err != nil {
						return err
					}
				}
				return nil
			}},
		{"referenced Secrets: opaque, registry and a service-account token made opaque", "vc:pkg/controllers/resources/secrets/to_host_syncer.go",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				for _, s := range []*corev1.Secret{
					{ObjectMeta: vcMeta(tenant, ns, "default", "s3-creds"), Type: corev1.SecretTypeOpaque, StringData: map[string]string{"key": "v"}},
					{ObjectMeta: vcMeta(tenant, ns, "default", "regcred"), Type: corev1.SecretTypeDockerConfigJson,
						StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{}}`}},
					{ObjectMeta: vcMeta(tenant, ns, "default", "legacy-token"), Type: corev1.SecretTypeOpaque, StringData: map[string]string{"token": "t"}},
				} {
					if _, err := as.CoreV1().Secrets(ns).Create(ctx, s, dryRun); err != nil {
						return fmt.Errorf("%s: %w", s.Name, err)
					}
				}
				return nil
			}},
		{"a pod's readiness-gate condition copied to its host pod", "vc:pkg/controllers/resources/pods/syncer.go (the virtual pod's conditions patched onto the host pod's status)",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				p := syncedPod(tenant, ns, "default", "gated", tenantLevels[tenant] == "restricted")
				p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/warm"}}
				created, err := as.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				if err != nil {
					return err
				}
				defer func() {
					_ = client.CoreV1().Pods(ns).Delete(context.Background(), created.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
				}()
				return rawPatch(ctx, as, types.StrategicMergePatchType, "/api/v1/namespaces/"+ns+"/pods/"+created.Name+"/status",
					`{"status":{"conditions":[{"type":"example.com/warm","status":"True"}]}}`)
			}},
		{"a pod with every volume kind a tenant may use", "vc:pkg/controllers/resources/pods/translate/translator.go translateVolumes (names translated, sources kept)",
			createPodAs(func(p *corev1.Pod, tenant string) {
				p.Spec.Volumes = append(p.Spec.Volumes,
					corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "train-config-x-default-x-" + tenant}}}},
					corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s3-creds-x-default-x-" + tenant}}},
					corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
					corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
						ClaimName: "data-x-default-x-" + tenant}}},
					corev1.Volume{Name: "labels", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
						{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
					corev1.Volume{Name: "cache", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
						VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
							AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("standard"),
							Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("1Gi")}}}}}}},
					corev1.Volume{Name: "vault", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io",
						ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{"secretProviderClass": "team"}}}})
			})},
		{"the Endpoints controller's Endpoints while a named port is renumbered", "kubernetes v1.34.4 pkg/controller/endpoint (one subset per port set)",
			func(ctx context.Context, _ kubernetes.Interface, tenant, ns string) error {
				// Not the tenant's identity: the controller's, impersonated. Old and new pods give two subsets of a
				// 10-port Service.
				controller, err := impersonating("system:serviceaccount:kube-system:endpoint-controller",
					"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
				if err != nil {
					return err
				}
				e := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: ns}}
				for subset, base := range []int32{8000, 9000} {
					var ss corev1.EndpointSubset
					ss.Addresses = []corev1.EndpointAddress{{IP: fmt.Sprintf("10.7.%d.1", subset)}}
					for i := range int32(tenancy.MaxEndpointPorts) {
						ss.Ports = append(ss.Ports, corev1.EndpointPort{Name: fmt.Sprintf("p%d", i), Port: base + i})
					}
					e.Subsets = append(e.Subsets, ss)
				}
				_, err = controller.CoreV1().Endpoints(ns).Create(ctx, e, dryRun)
				return err
			}},
		{"a volume claim of a storage class", "vc:pkg/controllers/resources/persistentvolumeclaims/translate.go",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				return createVolumeClaim(func(c *corev1.PersistentVolumeClaim) {
					c.ObjectMeta = vcMeta(tenant, ns, "default", "data")
					c.Spec.StorageClassName = ptr.To("standard")
				})(ctx, as, ns)
			}},
		{"a volume claim without a class, where the cluster has a default class", "vc:pkg/controllers/resources/persistentvolumeclaims/translate.go",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				// The DefaultStorageClass admission plugin gives it the simulated cluster's default class
				// (simhw.DefaultStorageClass) before the policies read it.
				return createVolumeClaim(func(c *corev1.PersistentVolumeClaim) { c.ObjectMeta = vcMeta(tenant, ns, "default", "data") })(ctx, as, ns)
			}},
		{"vCluster's leader-election event, with the managed fields the API server records", "vc:pkg/leaderelection (client-go tools/leaderelection/resourcelock)",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				e := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "vcluster-" + tenant + ".", Namespace: ns},
					InvolvedObject: corev1.ObjectReference{Kind: "Lease", Namespace: ns, Name: "vcluster-" + tenant + "-controller",
						UID: "3c5b1f0e-9d2a-4c4e-8f61-2a7d9b0c1e55", APIVersion: "coordination.k8s.io/v1", ResourceVersion: "1234"},
					Reason: "LeaderElection", Message: tenant + "-0_8d3f1c2e-5b7a-4e9d-a1c0-6f2b3d4e5a6b became leader",
					Source:         corev1.EventSource{Component: "vcluster-" + tenant + "-0_8d3f1c2e-5b7a-4e9d-a1c0-6f2b3d4e5a6b"},
					FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1, Type: corev1.EventTypeNormal}
				_, err := as.CoreV1().Events(ns).Create(ctx, e, dryRun)
				return err
			}},
		{"vCluster rewrites its kubeconfig Secret", "vc:pkg/util/kubeconfig/kubeconfig.go WriteKubeConfig",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				done, err := withKubeconfigSecret(ctx, tenant, ns)
				if err != nil {
					return err
				}
				defer done()
				secret, err := as.CoreV1().Secrets(ns).Get(ctx, naming.KubeconfigSecretPrefix+tenant, metav1.GetOptions{})
				if err != nil {
					return err
				}
				secret.Data["config"] = []byte("apiVersion: v1\nkind: Config\ncurrent-context: rewritten\n")
				_, err = as.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}},
		{"a claim with firstAvailable alternatives and a selector", "vc:pkg/mappings/resources/resourceclaims.go (Pro syncer)",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "v0a1b2c3d4e5f6", Namespace: ns,
					Labels: map[string]string{naming.VClusterManagedByLabel: tenant, "vcluster.loft.sh/namespace": "default"}},
					Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
						{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
							{Name: "big", DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1,
								Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].index >= 0"}}}},
							{Name: "any", DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1},
						}},
					}}}}
				_, err := as.ResourceV1().ResourceClaims(ns).Create(ctx, c, dryRun)
				if err != nil && strings.Contains(err.Error(), "exceeded quota: "+naming.TenantQuota) {
					return nil // a full device quota refuses it, never a policy
				}
				return err
			}},
		{"a claim template", "vc:pkg/mappings/resources/resourceclaimtemplates.go (Pro syncer)",
			func(ctx context.Context, as kubernetes.Interface, tenant, ns string) error {
				tpl := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "v0f1e2d3c4b5a6", Namespace: ns},
					Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
						{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}},
					}}}}}
				_, err := as.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tpl, dryRun)
				return err
			}},
	}
}

// checkLegitimateWorkloads: every object of legitimateFor is admitted for each tenant, as its syncer, under the
// tenant's Pod Security level.
func checkLegitimateWorkloads(t *testing.T, ctx context.Context) {
	for tenant, class := range map[string]string{legal: whole, research: slice} {
		ns := naming.Namespace(tenant)
		syncer, _ := syncerOf(t, ctx, tenant)
		t.Run(tenant+" ("+tenantLevels[tenant]+")", func(t *testing.T) {
			for _, l := range legitimateFor(class) {
				t.Run(l.name, func(t *testing.T) {
					assert.NoError(t, l.send(ctx, syncer, tenant, ns), "refused; the shape is %s's", l.source)
				})
			}
		})
	}
}

// checkNoFailedCreate: no controller was refused creating a pod in a tenant namespace (the vCluster control plane's
// StatefulSet above all), but while the namespace's service account did not exist yet, which the StatefulSet
// controller retries; and no guard refused the EndpointSlice controller the slices of the tenant's Services.
func checkNoFailedCreate(t *testing.T, ctx context.Context) {
	for tenant := range tenantLevels {
		events, err := client.CoreV1().Events(naming.Namespace(tenant)).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		require.NoError(t, err)
		for _, e := range events.Items {
			if strings.Contains(e.Message, "error looking up service account") {
				continue
			}
			assert.Fail(t, "FailedCreate", "%s %s/%s: %s", tenant, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
		events, err = client.CoreV1().Events(naming.Namespace(tenant)).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedToUpdateEndpointSlices"})
		require.NoError(t, err)
		for _, e := range events.Items {
			if strings.Contains(e.Message, "ValidatingAdmissionPolicy") {
				assert.Fail(t, "FailedToUpdateEndpointSlices", "%s %s/%s: %s", tenant, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
			}
		}
	}
}
