package tenancy

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ContainerResources are CPU and memory quantities ("500m", "1Gi"); empty means unset.
type ContainerResources struct {
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
}

// LimitRange is the tenant namespace's container defaults (a LimitRange of type Container): what a container that
// declares no request or limit gets, and the least it may request. A stack's `tenants[].limitRange` decodes into it.
type LimitRange struct {
	// DefaultRequest is a container's request when it sets none; empty fields take DefaultContainerRequest.
	DefaultRequest ContainerResources `json:"defaultRequest"`
	// DefaultLimit is a container's limit when it sets none. Empty: no CPU limit, and a memory limit of the tenant's
	// memory quota, so a job that requests up to the quota and sets no limit is admitted (LimitRanger would otherwise
	// give it a smaller limit than its request, and refuse it).
	DefaultLimit ContainerResources `json:"defaultLimit"`
	// MinRequest is the least a container may request; empty fields take DefaultContainerMin.
	MinRequest ContainerResources `json:"minRequest"`
}

// DefaultContainerRequest is the request of a container that declares none, so it still costs the quota, which caps
// requests. No CPU limit by default: CPU limits throttle, and the quota caps CPU requests.
var DefaultContainerRequest = ContainerResources{CPU: "100m", Memory: "128Mi"}

// DefaultContainerMin is the least CPU and memory a container may request, so a pod always costs the tenant's quota
// something: without it, pods that request nothing fill a node's pod slots at no cost.
var DefaultContainerMin = ContainerResources{CPU: "10m", Memory: "16Mi"}

// Tenant defaults for a stack's `tenants[]` entries.
const (
	DefaultCPUQuota     = "16"
	DefaultMemoryQuota  = "64Gi"
	DefaultStorageQuota = "100Gi"
)

// ObjectQuotaKeys are the object counts a tenant's quota caps, each a ResourceQuota key
// (https://kubernetes.io/docs/concepts/policy/resource-quotas/#object-count-quota), with its default. Each is capacity
// the tenants share and one tenant could otherwise take from all: pod slots on the GPU nodes its pods tolerate,
// Service cluster IPs and node ports, cloud load balancers and volumes, etcd space (claims, templates, ConfigMaps,
// Secrets, endpoints); an empty ResourceClaim costs no device quota.
var ObjectQuotaKeys = map[string]int{
	"pods":                                 100,
	"services":                             20,
	"services.loadbalancers":               0,
	"services.nodeports":                   0,
	"configmaps":                           100,
	"secrets":                              100,
	"persistentvolumeclaims":               10,
	"count/resourceclaims.resource.k8s.io": 100,
	"count/resourceclaimtemplates.resource.k8s.io": 50,
	"count/endpointslices.discovery.k8s.io":        100,
	"count/endpoints":                              50,
}

// VClusterServices is how many Services a tenant's vCluster itself holds in its host namespace at most: its own
// Service and headless Service from the chart, its CoreDNS Service (kube-dns-x-kube-system-x-<tenant>), and up to two
// while it probes the service range on its first start (loft-sh/vcluster v0.36.1 chart/templates/service.yaml,
// headless-service.yaml, pkg/coredns/template.go, pkg/util/servicecidr/servicecidr.go). Its per-node Services are off
// (components/vcluster, proxyKubelets.byIP). The Service quota must leave the tenant room beyond them.
const VClusterServices = 5

// PodSecurityVersion pins the Pod Security Standards version tenant namespaces enforce, so a cluster upgrade does
// not change what is admitted: the oldest Kubernetes version the platform supports.
const PodSecurityVersion = "v1.34"

// TenantArgs configure one tenant's host-side guard rails. A stack's `tenants[]` entry decodes into the tagged fields;
// the cluster-wide ones are set by the caller.
type TenantArgs struct {
	// Name is the tenant; see ValidateTenantName.
	Name string `json:"name"`
	// Classes are the granted class names; each must be a class of the catalog.
	Classes []string `json:"classes"`
	// GPUQuota caps the devices the tenant may hold per granted class; every granted class needs an entry.
	GPUQuota map[string]int `json:"gpuQuota"`
	// CPUQuota and MemoryQuota cap the namespace's CPU and memory requests ("16", "64Gi"). The vCluster's own control
	// plane runs in the namespace and counts against them.
	CPUQuota    string `json:"cpuQuota"`
	MemoryQuota string `json:"memoryQuota"`
	// MemoryLimitQuota also caps the sum of the namespace's memory limits when set; unset by default, since a
	// container without a limit gets the default limit (the memory quota) and a cap on limits would then admit one
	// such pod. Requests are what the scheduler reserves; memory used above them is what the kubelet evicts first
	// under node pressure (docs/tenants.md, "Limits and quotas").
	MemoryLimitQuota string `json:"memoryLimitQuota"`
	// StorageQuota caps the storage its volume claims request ("100Gi"); the vCluster's own volume counts.
	StorageQuota string `json:"storageQuota"`
	// ObjectQuota overrides the object counts of ObjectQuotaKeys, by ResourceQuota key.
	ObjectQuota map[string]int `json:"objectQuota"`
	// BlockedEgressCIDRs are further destinations the tenant's pods may not reach, besides the cloud metadata
	// endpoints (node or VPC ranges); IPv4 and IPv6 both work.
	BlockedEgressCIDRs []string `json:"blockedEgressCIDRs"`
	// PodSecurity is the Pod Security Standard the tenant's namespace enforces: baseline (default) or restricted.
	// Warnings and audit annotations always apply restricted.
	PodSecurity string `json:"podSecurity"`

	// LimitRange is the namespace's container defaults.
	LimitRange LimitRange `json:"limitRange"`
	// ExtendedResourceNames are the extended-resource names of the granted classes whose DeviceClass carries one
	// (CatalogArgs.ExtendedResourceClasses), by class; the caller sets them. The quota caps each name as it caps the
	// class's devices.
	ExtendedResourceNames map[string]string `json:"-"`
	// Network holds the cluster-wide network settings every tenant shares.
	Network NetworkArgs `json:"-"`
	// Catalog is the GPU catalog; the tenant's namespace waits for its guards.
	Catalog *Catalog `json:"-"`
}

// WithDefaults returns the args with empty quotas and container defaults filled in.
func (a TenantArgs) WithDefaults() TenantArgs {
	if a.CPUQuota == "" {
		a.CPUQuota = DefaultCPUQuota
	}
	if a.MemoryQuota == "" {
		a.MemoryQuota = DefaultMemoryQuota
	}
	if a.StorageQuota == "" {
		a.StorageQuota = DefaultStorageQuota
	}
	if a.PodSecurity == "" {
		a.PodSecurity = naming.PodSecurityBaseline
	}
	objects := maps.Clone(ObjectQuotaKeys)
	maps.Copy(objects, a.ObjectQuota)
	a.ObjectQuota = objects
	a.LimitRange.DefaultRequest = withDefaults(a.LimitRange.DefaultRequest, DefaultContainerRequest)
	a.LimitRange.DefaultLimit = withDefaults(a.LimitRange.DefaultLimit, ContainerResources{Memory: a.MemoryQuota})
	a.LimitRange.MinRequest = withDefaults(a.LimitRange.MinRequest, DefaultContainerMin)
	return a
}

// Tenant is one tenant's host namespace with its grants, entitlement binding, quota, defaults and network policies.
type Tenant struct {
	pulumi.ResourceState

	// Name is the tenant name.
	Name string
	// Namespace is the tenant's host namespace, where its vCluster runs; it exists only once the entitlement
	// binding and the catalog's guards do, so nothing can be created in it unchecked.
	Namespace pulumi.StringOutput
	// Classes are the granted class names.
	Classes pulumi.StringArrayOutput
	// PodSecurity is the Pod Security Standard the namespace enforces.
	PodSecurity string
	// Admission are the objects that must exist before workloads enter the namespace (its quota and limit range);
	// depend on them directly, since a dependency on the component covers only the children registered so far.
	Admission []pulumi.Resource
}

// Validate checks the tenant's own settings (after defaults) at path, the tenant's `tenants[i]` entry: the grant
// against the catalog is checked by ValidateGrant. It is the single owner of a tenant's rules.
func (a *TenantArgs) Validate(path *field.Path) field.ErrorList {
	d := a.WithDefaults()
	errs := ValidateTenantName(path.Child("name"), a.Name)
	for j, class := range a.Classes {
		if slices.Contains(a.Classes[:j], class) {
			errs = append(errs, field.Duplicate(path.Child("classes").Index(j), class))
		}
		if _, ok := a.GPUQuota[class]; !ok {
			errs = append(errs, field.Required(path.Child("gpuQuota").Key(class),
				"a device quota (how many devices of this class the tenant may hold) for every granted class"))
		}
	}
	for _, class := range slices.Sorted(maps.Keys(a.GPUQuota)) {
		qp := path.Child("gpuQuota").Key(class)
		if !slices.Contains(a.Classes, class) {
			errs = append(errs, field.Invalid(qp, a.GPUQuota[class], fmt.Sprintf("class %q is not granted to this tenant (%s)", class, path.Child("classes"))))
		}
		if a.GPUQuota[class] < 0 {
			errs = append(errs, field.Invalid(qp, a.GPUQuota[class], "must be 0 or more"))
		}
	}
	errs = append(errs, fieldcheck.Quantity(path.Child("cpuQuota"), d.CPUQuota, true)...)
	errs = append(errs, fieldcheck.Quantity(path.Child("memoryQuota"), d.MemoryQuota, true)...)
	errs = append(errs, fieldcheck.Quantity(path.Child("storageQuota"), d.StorageQuota, true)...)
	if d.MemoryLimitQuota != "" {
		mp := path.Child("memoryLimitQuota")
		errs = append(errs, fieldcheck.Quantity(mp, d.MemoryLimitQuota, true)...)
		if above(d.LimitRange.DefaultLimit.Memory, d.MemoryLimitQuota) {
			errs = append(errs, field.Invalid(mp, d.MemoryLimitQuota, fmt.Sprintf(
				"must not be below the default memory limit %s (%s): every container that sets no limit would be refused",
				d.LimitRange.DefaultLimit.Memory, path.Child("limitRange", "defaultLimit", "memory"))))
		}
	}
	keys := slices.Sorted(maps.Keys(ObjectQuotaKeys))
	for _, key := range slices.Sorted(maps.Keys(a.ObjectQuota)) {
		qp := path.Child("objectQuota").Key(key)
		if _, ok := ObjectQuotaKeys[key]; !ok {
			errs = append(errs, field.NotSupported(qp, key, keys))
		} else if a.ObjectQuota[key] < 0 {
			errs = append(errs, field.Invalid(qp, a.ObjectQuota[key], "must be 0 or more"))
		}
	}
	errs = append(errs, validateServiceRoom(path.Child("objectQuota"), d.ObjectQuota)...)
	errs = append(errs, validateContainerDefaults(path.Child("limitRange"), d.LimitRange)...)
	for j, c := range a.BlockedEgressCIDRs {
		errs = append(errs, validateBlockedCIDR(path.Child("blockedEgressCIDRs").Index(j), c)...)
	}
	if !slices.Contains(naming.TenantPodSecurityLevels, d.PodSecurity) {
		errs = append(errs, field.NotSupported(path.Child("podSecurity"), d.PodSecurity, naming.TenantPodSecurityLevels))
	}
	return errs
}

// validateServiceRoom checks the object counts that grow with Services: the vCluster's own Services fit under the
// Service quota, and the Endpoints and EndpointSlices the host's controllers write for each Service fit under theirs.
func validateServiceRoom(path *field.Path, quota map[string]int) field.ErrorList {
	var errs field.ErrorList
	services := quota["services"]
	if services < VClusterServices {
		errs = append(errs, field.Invalid(path.Key("services"), services, fmt.Sprintf(
			"must be at least %d: the tenant's vCluster itself holds up to %d Services (docs/tenants.md, \"Limits and quotas\")",
			VClusterServices, VClusterServices)))
	}
	for _, key := range []string{"count/endpoints", "count/endpointslices.discovery.k8s.io"} {
		if quota[key] < services {
			errs = append(errs, field.Invalid(path.Key(key), quota[key], fmt.Sprintf(
				"must be at least the Service quota (%d): the host's controllers write one for each Service", services)))
		}
	}
	return errs
}

// validateContainerDefaults checks the LimitRange: quantities, and min <= default request <= default limit, which
// the API server would otherwise reject on every pod that takes the defaults.
func validateContainerDefaults(path *field.Path, lr LimitRange) field.ErrorList {
	var errs field.ErrorList
	req, lim, min := lr.DefaultRequest, lr.DefaultLimit, lr.MinRequest
	for _, q := range []struct {
		field, request, limit, min string
	}{{"cpu", req.CPU, lim.CPU, min.CPU}, {"memory", req.Memory, lim.Memory, min.Memory}} {
		rp, lp, mp := path.Child("defaultRequest", q.field), path.Child("defaultLimit", q.field), path.Child("minRequest", q.field)
		errs = append(errs, fieldcheck.Quantity(rp, q.request, true)...)
		errs = append(errs, fieldcheck.Quantity(lp, q.limit, true)...)
		errs = append(errs, fieldcheck.Quantity(mp, q.min, true)...)
		if above(q.request, q.limit) {
			errs = append(errs, field.Invalid(rp, q.request, fmt.Sprintf("must not be above the default limit %s", q.limit)))
		}
		if above(q.min, q.request) {
			errs = append(errs, field.Invalid(mp, q.min, fmt.Sprintf("must not be above the default request %s", q.request)))
		}
	}
	return errs
}

// above reports whether quantity a is greater than b; false when either is empty or not a quantity (reported apart).
func above(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	return a != "" && b != "" && errA == nil && errB == nil && qa.Cmp(qb) > 0
}

func withDefaults(r, def ContainerResources) ContainerResources {
	if r.CPU == "" {
		r.CPU = def.CPU
	}
	if r.Memory == "" {
		r.Memory = def.Memory
	}
	return r
}

// NewTenant creates the tenant's namespace, labelled with its grants, after the catalog's guards, then the
// namespace's quota, container defaults and network policies. Tenants depend on the catalog only, never on each other.
func NewTenant(ctx *pulumi.Context, name string, args *TenantArgs, opts ...pulumi.ResourceOption) (*Tenant, error) {
	if args == nil {
		return nil, errors.New("creating tenant: args are required")
	}
	if args.Catalog == nil {
		return nil, fmt.Errorf("creating tenant %q: catalog is required", args.Name)
	}
	errs := args.Validate(field.NewPath("tenant"))
	errs = append(errs, args.Network.Validate(field.NewPath("network"))...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("creating tenant %q: %w", args.Name, errs.ToAggregate())
	}
	cfg := args.WithDefaults()
	t := &Tenant{Name: cfg.Name, PodSecurity: cfg.PodSecurity}
	if err := ctx.RegisterComponentResource("gpu-tenancy:tenancy:Tenant", name, t, opts...); err != nil {
		return nil, fmt.Errorf("registering tenant %q: %w", cfg.Name, err)
	}

	nsName := naming.Namespace(cfg.Name)
	ns, err := corev1.NewNamespace(ctx, name+"-namespace", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(nsName), Labels: managedLabels(namespaceLabels(cfg.Name, cfg.PodSecurity, cfg.Classes))},
	}, pulumi.Parent(t), pulumi.DependsOn(cfg.Catalog.Guards))
	if err != nil {
		return nil, fmt.Errorf("creating namespace %q: %w", nsName, err)
	}
	namespace := ns.Metadata.Name().Elem()

	// The namespace's own objects go with it: when a destroy deletes the namespace, the engine deletes no object in it
	// one by one (pulumi pkg v3.274.1 resource/deploy/step.go, DeleteStep and deletedWith).
	inNamespace := []pulumi.ResourceOption{pulumi.Parent(t), pulumi.DeletedWith(ns)}
	if t.Admission, err = newQuota(ctx, name, &cfg, namespace, inNamespace...); err != nil {
		return nil, err
	}
	if err := newNetworkPolicies(ctx, name, cfg.Network.policyConfig(cfg.BlockedEgressCIDRs), namespace, inNamespace...); err != nil {
		return nil, err
	}
	if err := newTenantFairness(ctx, name, cfg.Name, pulumi.Parent(t)); err != nil {
		return nil, err
	}

	t.Namespace = namespace
	t.Classes = pulumi.ToStringArray(cfg.Classes).ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(t, pulumi.Map{
		"namespace":   t.Namespace,
		"classes":     t.Classes,
		"podSecurity": pulumi.String(t.PodSecurity),
	}); err != nil {
		return nil, fmt.Errorf("registering tenant %q outputs: %w", cfg.Name, err)
	}
	return t, nil
}

// namespaceLabels are a tenant namespace's labels: the tenant, its grants (which the entitlement policy reads), and
// Pod Security Admission enforcing the tenant's level with warnings and audit at restricted, all at a pinned version.
func namespaceLabels(tenant, level string, classes []string) map[string]string {
	labels := map[string]string{
		naming.TenantNamespaceLabel:           tenant,
		naming.PodSecurityEnforceLabel:        level,
		naming.PodSecurityEnforceVersionLabel: PodSecurityVersion,
		naming.PodSecurityWarnLabel:           naming.PodSecurityRestricted,
		naming.PodSecurityWarnVersionLabel:    PodSecurityVersion,
		naming.PodSecurityAuditLabel:          naming.PodSecurityRestricted,
		naming.PodSecurityAuditVersionLabel:   PodSecurityVersion,
		naming.GrantsLabel:                    "true",
	}
	for _, class := range classes {
		labels[naming.ClassGrantLabel(class)] = "true"
	}
	return labels
}

// newQuota caps CPU, memory, storage, object counts and each granted class's devices, and sets container defaults so
// pods without resources still fit the quota, and a minimum so no pod is free. Foreign classes need no zero quota: the entitlement policy already denies them.
func newQuota(ctx *pulumi.Context, name string, cfg *TenantArgs, namespace pulumi.StringOutput, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	hard := pulumi.StringMap{
		"requests.cpu":     pulumi.String(cfg.CPUQuota),
		"requests.memory":  pulumi.String(cfg.MemoryQuota),
		"requests.storage": pulumi.String(cfg.StorageQuota),
	}
	if cfg.MemoryLimitQuota != "" {
		hard["limits.memory"] = pulumi.String(cfg.MemoryLimitQuota)
	}
	for key, count := range cfg.ObjectQuota {
		hard[key] = pulumi.String(fmt.Sprint(count))
	}
	for _, class := range cfg.Classes {
		hard[naming.DeviceQuotaKey(class)] = pulumi.String(fmt.Sprint(cfg.GPUQuota[class]))
		// The same cap on the class's name: the pod evaluator charges it when a pod asking for the name is created, so
		// the pod over the quota is refused then, and the claim evaluator charges the class's claims to it, less what
		// their pod pays (kubernetes v1.36.3 pkg/quota/v1/evaluator/core/pods.go, resource_claims.go
		// addExtendedResourceQuota). A cap on the device key alone would meet such a pod only when the scheduler
		// creates its claim, leaving it waiting there.
		if resourceName, ok := cfg.ExtendedResourceNames[class]; ok {
			hard[naming.RequestsQuotaKey(resourceName)] = pulumi.String(fmt.Sprint(cfg.GPUQuota[class]))
		}
	}
	quota, err := corev1.NewResourceQuota(ctx, name+"-quota", &corev1.ResourceQuotaArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.TenantQuota), Namespace: namespace, Labels: managedLabels(nil)},
		Spec:     &corev1.ResourceQuotaSpecArgs{Hard: hard},
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating ResourceQuota in %q: %w", naming.Namespace(cfg.Name), err)
	}
	limits, err := corev1.NewLimitRange(ctx, name+"-limits", &corev1.LimitRangeArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.ContainerDefaults), Namespace: namespace, Labels: managedLabels(nil)},
		Spec: &corev1.LimitRangeSpecArgs{Limits: corev1.LimitRangeItemArray{corev1.LimitRangeItemArgs{
			Type:           pulumi.String("Container"),
			DefaultRequest: resourceMap(cfg.LimitRange.DefaultRequest),
			Default:        resourceMap(cfg.LimitRange.DefaultLimit),
			Min:            resourceMap(cfg.LimitRange.MinRequest),
		}}},
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating LimitRange in %q: %w", naming.Namespace(cfg.Name), err)
	}
	return []pulumi.Resource{quota, limits}, nil
}

func resourceMap(r ContainerResources) pulumi.StringMap {
	m := pulumi.StringMap{}
	if r.CPU != "" {
		m["cpu"] = pulumi.String(r.CPU)
	}
	if r.Memory != "" {
		m["memory"] = pulumi.String(r.Memory)
	}
	return m
}
