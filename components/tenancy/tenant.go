package tenancy

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/fieldcheck"
	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ContainerResources are CPU and memory quantities ("500m", "1Gi"); empty means unset.
type ContainerResources struct {
	CPU    string
	Memory string
}

// Defaults for containers that declare no resources, so they still fit a quota that caps requests.cpu,
// requests.memory and limits.memory. No CPU limit by default: CPU limits throttle, and the quota caps CPU requests.
var (
	DefaultContainerRequest = ContainerResources{CPU: "100m", Memory: "128Mi"}
	DefaultContainerLimit   = ContainerResources{Memory: "512Mi"}
)

// SystemNamespace holds the platform-owned grants; tenants and vCluster syncers have no access to it, so a tenant
// cannot widen its own grant.
const SystemNamespace = "gpu-tenancy-system"

// GrantsConfigMap is the name of a tenant's grants ConfigMap in SystemNamespace, the entitlement policy's params.
func GrantsConfigMap(tenant string) string { return "grants-" + tenant }

// Tenant defaults for a stack's `tenants[]` entries.
const (
	DefaultCPUQuota    = "16"
	DefaultMemoryQuota = "64Gi"
)

// TenantArgs configure one tenant's host-side guard rails. A stack's `tenants[]` entry decodes into the tagged fields;
// the cluster-wide ones are set by the caller.
type TenantArgs struct {
	// Name is the tenant; see ValidateTenantName.
	Name string `json:"name"`
	// Classes are the granted class names; each must be a class of the catalog.
	Classes []string `json:"classes"`
	// GPUQuota caps the devices the tenant may hold per granted class; every granted class needs an entry.
	GPUQuota map[string]int `json:"gpuQuota"`
	// CPUQuota and MemoryQuota cap the namespace's CPU requests and memory requests and limits ("16", "64Gi"). The
	// vCluster's own control plane runs in the namespace and counts against them.
	CPUQuota    string `json:"cpuQuota"`
	MemoryQuota string `json:"memoryQuota"`
	// BlockedEgressCIDRs are further destinations the tenant's pods may not reach, besides the cloud metadata
	// endpoints (node or VPC ranges); IPv4 and IPv6 both work.
	BlockedEgressCIDRs []string `json:"blockedEgressCIDRs"`

	// DefaultRequest and DefaultLimit are the LimitRange defaults for containers; empty fields take
	// DefaultContainerRequest and DefaultContainerLimit.
	DefaultRequest ContainerResources `json:"-"`
	DefaultLimit   ContainerResources `json:"-"`
	// Network holds the cluster-wide network settings every tenant shares.
	Network NetworkArgs `json:"-"`
	// Catalog is the GPU catalog whose entitlement policy the tenant binds.
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
	a.DefaultRequest = withDefaults(a.DefaultRequest, DefaultContainerRequest)
	a.DefaultLimit = withDefaults(a.DefaultLimit, DefaultContainerLimit)
	return a
}

// Tenant is one tenant's host namespace with its grants, entitlement binding, quota, defaults and network policies.
type Tenant struct {
	pulumi.ResourceState

	// Name is the tenant name.
	Name string
	// Namespace is the tenant's host namespace, where its vCluster runs; it exists only once the entitlement
	// binding does, so nothing can be created in it unchecked.
	Namespace pulumi.StringOutput
	// Classes are the granted class names.
	Classes pulumi.StringArrayOutput
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
			errs = append(errs, field.Required(path.Child("gpuQuota").Child(class),
				"a device quota (how many devices of this class the tenant may hold) for every granted class"))
		}
	}
	for _, class := range slices.Sorted(maps.Keys(a.GPUQuota)) {
		qp := path.Child("gpuQuota").Child(class)
		if !slices.Contains(a.Classes, class) {
			errs = append(errs, field.Invalid(qp, a.GPUQuota[class], fmt.Sprintf("class %q is not granted to this tenant (%s)", class, path.Child("classes"))))
		}
		if a.GPUQuota[class] < 0 {
			errs = append(errs, field.Invalid(qp, a.GPUQuota[class], "must be 0 or more"))
		}
	}
	errs = append(errs, fieldcheck.Quantity(path.Child("cpuQuota"), d.CPUQuota, true)...)
	errs = append(errs, fieldcheck.Quantity(path.Child("memoryQuota"), d.MemoryQuota, true)...)
	errs = append(errs, validateContainerDefaults(path, d.DefaultRequest, d.DefaultLimit)...)
	for j, c := range a.BlockedEgressCIDRs {
		errs = append(errs, validateBlockedCIDR(path.Child("blockedEgressCIDRs").Index(j), c)...)
	}
	return errs
}

// validateContainerDefaults checks the LimitRange defaults: quantities, and no default request above its default
// limit, which the API server would reject on every pod that takes both defaults.
func validateContainerDefaults(path *field.Path, req, lim ContainerResources) field.ErrorList {
	var errs field.ErrorList
	for _, q := range []struct {
		field, request, limit string
	}{{"cpu", req.CPU, lim.CPU}, {"memory", req.Memory, lim.Memory}} {
		rp, lp := path.Child("defaultRequest", q.field), path.Child("defaultLimit", q.field)
		errs = append(errs, fieldcheck.Quantity(rp, q.request, true)...)
		errs = append(errs, fieldcheck.Quantity(lp, q.limit, true)...)
		r, errR := resource.ParseQuantity(q.request)
		l, errL := resource.ParseQuantity(q.limit)
		if q.request != "" && q.limit != "" && errR == nil && errL == nil && r.Cmp(l) > 0 {
			errs = append(errs, field.Invalid(rp, q.request, fmt.Sprintf("must not be above the default limit %s", q.limit)))
		}
	}
	return errs
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

// NewTenant creates the tenant's grants and entitlement binding first and its namespace after them, then the
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
	t := &Tenant{Name: cfg.Name}
	if err := ctx.RegisterComponentResource("gpu-tenancy:tenancy:Tenant", name, t, opts...); err != nil {
		return nil, fmt.Errorf("registering tenant %q: %w", cfg.Name, err)
	}

	binding, err := newEntitlementBinding(ctx, name, &cfg, t)
	if err != nil {
		return nil, err
	}
	nsName := naming.Namespace(cfg.Name)
	ns, err := corev1.NewNamespace(ctx, name+"-namespace", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(nsName),
			Labels: managedLabels(map[string]string{naming.TenantNamespaceLabel: cfg.Name}),
		},
	}, pulumi.Parent(t), pulumi.DependsOn([]pulumi.Resource{binding}))
	if err != nil {
		return nil, fmt.Errorf("creating namespace %q: %w", nsName, err)
	}
	namespace := ns.Metadata.Name().Elem()

	if t.Admission, err = newQuota(ctx, name, &cfg, namespace, t); err != nil {
		return nil, err
	}
	if err := newNetworkPolicies(ctx, name, cfg.Network.policyConfig(cfg.BlockedEgressCIDRs), namespace, t); err != nil {
		return nil, err
	}

	t.Namespace = namespace
	t.Classes = pulumi.ToStringArray(cfg.Classes).ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(t, pulumi.Map{
		"namespace": t.Namespace,
		"classes":   t.Classes,
	}); err != nil {
		return nil, fmt.Errorf("registering tenant %q outputs: %w", cfg.Name, err)
	}
	return t, nil
}

// newEntitlementBinding writes the tenant's grants into the platform-owned system namespace, never the tenant's
// own (the vCluster syncer writes there), and binds the entitlement policy to the tenant's namespace with them.
// A missing grants ConfigMap denies (parameterNotFoundAction Deny).
func newEntitlementBinding(ctx *pulumi.Context, name string, cfg *TenantArgs, parent pulumi.Resource) (pulumi.Resource, error) {
	catalog := cfg.Catalog
	grants := pulumi.StringMap{}
	for _, class := range cfg.Classes {
		grants[class] = pulumi.String(grantedValue)
	}
	cmName := GrantsConfigMap(cfg.Name)
	cm, err := corev1.NewConfigMap(ctx, name+"-grants", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String(cmName),
			Namespace: catalog.SystemNamespace,
			Labels:    managedLabels(map[string]string{naming.TenantNamespaceLabel: cfg.Name}),
		},
		Data: grants,
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating grants ConfigMap %q: %w", cmName, err)
	}
	bindingName := naming.EntitlementPolicy(cfg.Name)
	binding, err := admissionv1.NewValidatingAdmissionPolicyBinding(ctx, name+"-entitlements", &admissionv1.ValidatingAdmissionPolicyBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(bindingName),
			Labels: managedLabels(map[string]string{naming.TenantNamespaceLabel: cfg.Name}),
		},
		Spec: &admissionv1.ValidatingAdmissionPolicyBindingSpecArgs{
			PolicyName:        catalog.EntitlementPolicy,
			ValidationActions: pulumi.ToStringArray([]string{"Deny"}),
			ParamRef: &admissionv1.ParamRefArgs{
				Name:                    cm.Metadata.Name().Elem(),
				Namespace:               cm.Metadata.Namespace().Elem(),
				ParameterNotFoundAction: pulumi.String("Deny"),
			},
			MatchResources: &admissionv1.MatchResourcesArgs{
				NamespaceSelector: &metav1.LabelSelectorArgs{
					MatchLabels: pulumi.StringMap{naming.TenantNamespaceLabel: pulumi.String(cfg.Name)},
				},
			},
		},
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicyBinding %q: %w", bindingName, err)
	}
	return binding, nil
}

// newQuota caps CPU, memory and each granted class's devices, and sets container defaults so pods without resources
// still fit the quota. Foreign classes need no zero quota: the entitlement policy already denies them.
func newQuota(ctx *pulumi.Context, name string, cfg *TenantArgs, namespace pulumi.StringOutput, parent pulumi.Resource) ([]pulumi.Resource, error) {
	hard := pulumi.StringMap{
		"requests.cpu":    pulumi.String(cfg.CPUQuota),
		"requests.memory": pulumi.String(cfg.MemoryQuota),
		"limits.memory":   pulumi.String(cfg.MemoryQuota),
	}
	for _, class := range cfg.Classes {
		hard[naming.DeviceQuotaKey(class)] = pulumi.String(fmt.Sprint(cfg.GPUQuota[class]))
	}
	quota, err := corev1.NewResourceQuota(ctx, name+"-quota", &corev1.ResourceQuotaArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.TenantQuota), Namespace: namespace, Labels: managedLabels(nil)},
		Spec:     &corev1.ResourceQuotaSpecArgs{Hard: hard},
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating ResourceQuota in %q: %w", naming.Namespace(cfg.Name), err)
	}
	limits, err := corev1.NewLimitRange(ctx, name+"-limits", &corev1.LimitRangeArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(naming.ContainerDefaults), Namespace: namespace, Labels: managedLabels(nil)},
		Spec: &corev1.LimitRangeSpecArgs{Limits: corev1.LimitRangeItemArray{corev1.LimitRangeItemArgs{
			Type:           pulumi.String("Container"),
			DefaultRequest: resourceMap(cfg.DefaultRequest),
			Default:        resourceMap(cfg.DefaultLimit),
		}}},
	}, pulumi.Parent(parent))
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
