package tenancy

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"
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

// TenantArgs configure one tenant's host-side guard rails.
type TenantArgs struct {
	// Name is the tenant; a DNS label of at most 54 characters.
	Name string
	// Catalog is the GPU catalog: the tenant binds its entitlement policy and keeps its grants in its system namespace.
	Catalog *Catalog
	// Classes are the granted class names. Empty means the classes the catalog grants the tenant; when set it must
	// name exactly those, so the grant is written in one place (GPUClass.Tenants) and checked here.
	Classes []string
	// DeviceQuota caps the devices the tenant may hold per granted class; every granted class needs an entry.
	DeviceQuota map[string]int
	// CPU and Memory cap the namespace's CPU requests and memory requests and limits ("16", "64Gi"). The
	// vCluster's own control plane runs in the namespace and counts against them.
	CPU    string
	Memory string
	// DefaultRequest and DefaultLimit are the LimitRange defaults for containers; empty fields take
	// DefaultContainerRequest and DefaultContainerLimit.
	DefaultRequest ContainerResources
	DefaultLimit   ContainerResources
	// Network configures the namespace's network policies.
	Network NetworkArgs
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

type tenantConfig struct {
	name           string
	classes        []string
	quota          map[string]int
	cpu, memory    string
	defaultRequest ContainerResources
	defaultLimit   ContainerResources
	network        networkConfig
}

// Validate reports every problem with the args against the catalog's classes, without creating anything, so a
// config loader can check tenants before the catalog exists. Catalog itself is not checked.
func (a *TenantArgs) Validate(classes []GPUClass) error {
	_, err := a.resolve(classes)
	return err
}

func (a *TenantArgs) resolve(catalog []GPUClass) (*tenantConfig, error) {
	cfg := &tenantConfig{
		name: a.Name, quota: a.DeviceQuota, cpu: a.CPU, memory: a.Memory,
		defaultRequest: withDefaults(a.DefaultRequest, DefaultContainerRequest),
		defaultLimit:   withDefaults(a.DefaultLimit, DefaultContainerLimit),
	}
	var errs []error
	if err := ValidateTenantName(a.Name); err != nil {
		errs = append(errs, err)
	}
	classes, err := a.grantedClasses(catalog)
	cfg.classes = classes
	errs = append(errs, err)
	for _, class := range cfg.classes {
		if _, ok := a.DeviceQuota[class]; !ok {
			errs = append(errs, fmt.Errorf("device quota for granted class %q is missing", class))
		}
	}
	for _, class := range slices.Sorted(maps.Keys(a.DeviceQuota)) {
		if n := a.DeviceQuota[class]; n < 0 {
			errs = append(errs, fmt.Errorf("device quota for class %q is %d, must not be negative", class, n))
		}
		if !slices.Contains(cfg.classes, class) {
			errs = append(errs, fmt.Errorf("device quota names class %q, which is not granted to the tenant", class))
		}
	}
	errs = append(errs,
		parseQuantity("CPU quota", a.CPU, true), parseQuantity("memory quota", a.Memory, true),
		parseQuantity("default CPU request", cfg.defaultRequest.CPU, false),
		parseQuantity("default memory request", cfg.defaultRequest.Memory, false),
		parseQuantity("default CPU limit", cfg.defaultLimit.CPU, false),
		parseQuantity("default memory limit", cfg.defaultLimit.Memory, false),
		notAbove("default CPU request", cfg.defaultRequest.CPU, "default CPU limit", cfg.defaultLimit.CPU),
		notAbove("default memory request", cfg.defaultRequest.Memory, "default memory limit", cfg.defaultLimit.Memory),
	)
	network, err := a.Network.resolve()
	cfg.network = network
	errs = append(errs, err)
	return cfg, errors.Join(errs...)
}

// grantedClasses checks Classes against the catalog's grants and returns the granted classes.
func (a *TenantArgs) grantedClasses(catalog []GPUClass) ([]string, error) {
	granted := grantedTo(catalog, a.Name)
	if a.Classes == nil {
		return granted, nil
	}
	var errs []error
	for i, class := range a.Classes {
		switch {
		case slices.Contains(a.Classes[:i], class):
			errs = append(errs, fmt.Errorf("class %q is listed twice", class))
		case !slices.ContainsFunc(catalog, func(c GPUClass) bool { return c.Name == class }):
			errs = append(errs, fmt.Errorf("class %q is not in the catalog", class))
		case !slices.Contains(granted, class):
			errs = append(errs, fmt.Errorf("class %q does not list tenant %q in its Tenants", class, a.Name))
		}
	}
	for _, class := range granted {
		if !slices.Contains(a.Classes, class) {
			errs = append(errs, fmt.Errorf("the catalog grants class %q to tenant %q but Classes omits it", class, a.Name))
		}
	}
	return granted, errors.Join(errs...)
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

func parseQuantity(what, q string, required bool) error {
	if q == "" {
		if required {
			return fmt.Errorf("%s is required", what)
		}
		return nil
	}
	if _, err := resource.ParseQuantity(q); err != nil {
		return fmt.Errorf("%s %q is not a Kubernetes quantity", what, q)
	}
	return nil
}

// notAbove reports a default request above its default limit, which the API server would reject on every pod that
// takes both defaults.
func notAbove(reqWhat, req, limWhat, lim string) error {
	r, errR := resource.ParseQuantity(req)
	l, errL := resource.ParseQuantity(lim)
	if req == "" || lim == "" || errR != nil || errL != nil || r.Cmp(l) <= 0 {
		return nil
	}
	return fmt.Errorf("%s %s is above the %s %s", reqWhat, req, limWhat, lim)
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
	cfg, err := args.resolve(args.Catalog.classes)
	if err != nil {
		return nil, fmt.Errorf("creating tenant %q: %w", args.Name, err)
	}
	t := &Tenant{Name: cfg.name}
	if err := ctx.RegisterComponentResource("gpu-tenancy:tenancy:Tenant", name, t, opts...); err != nil {
		return nil, fmt.Errorf("registering tenant %q: %w", cfg.name, err)
	}

	binding, err := newEntitlementBinding(ctx, name, cfg, args.Catalog, t)
	if err != nil {
		return nil, err
	}
	nsName := Namespace(cfg.name)
	ns, err := corev1.NewNamespace(ctx, name+"-namespace", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(nsName),
			Labels: managedLabels(map[string]string{TenantNamespaceLabel: cfg.name}),
		},
	}, pulumi.Parent(t), pulumi.DependsOn([]pulumi.Resource{binding}))
	if err != nil {
		return nil, fmt.Errorf("creating namespace %q: %w", nsName, err)
	}
	namespace := ns.Metadata.Name().Elem()

	if t.Admission, err = newQuota(ctx, name, cfg, namespace, t); err != nil {
		return nil, err
	}
	if err := newNetworkPolicies(ctx, name, cfg.network, namespace, t); err != nil {
		return nil, err
	}

	t.Namespace = namespace
	t.Classes = pulumi.ToStringArray(cfg.classes).ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(t, pulumi.Map{
		"namespace": t.Namespace,
		"classes":   t.Classes,
	}); err != nil {
		return nil, fmt.Errorf("registering tenant %q outputs: %w", cfg.name, err)
	}
	return t, nil
}

// newEntitlementBinding writes the tenant's grants into the platform-owned system namespace, never the tenant's
// own (the vCluster syncer writes there), and binds the entitlement policy to the tenant's namespace with them.
// A missing grants ConfigMap denies (parameterNotFoundAction Deny).
func newEntitlementBinding(ctx *pulumi.Context, name string, cfg *tenantConfig, catalog *Catalog, parent pulumi.Resource) (pulumi.Resource, error) {
	grants := pulumi.StringMap{}
	for _, class := range cfg.classes {
		grants[class] = pulumi.String(grantedValue)
	}
	cmName := GrantsConfigMap(cfg.name)
	cm, err := corev1.NewConfigMap(ctx, name+"-grants", &corev1.ConfigMapArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String(cmName),
			Namespace: catalog.SystemNamespace,
			Labels:    managedLabels(map[string]string{TenantNamespaceLabel: cfg.name}),
		},
		Data: grants,
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating grants ConfigMap %q: %w", cmName, err)
	}
	bindingName := EntitlementBinding(cfg.name)
	binding, err := admissionv1.NewValidatingAdmissionPolicyBinding(ctx, name+"-entitlements", &admissionv1.ValidatingAdmissionPolicyBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:   pulumi.String(bindingName),
			Labels: managedLabels(map[string]string{TenantNamespaceLabel: cfg.name}),
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
					MatchLabels: pulumi.StringMap{TenantNamespaceLabel: pulumi.String(cfg.name)},
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
func newQuota(ctx *pulumi.Context, name string, cfg *tenantConfig, namespace pulumi.StringOutput, parent pulumi.Resource) ([]pulumi.Resource, error) {
	hard := pulumi.StringMap{
		"requests.cpu":    pulumi.String(cfg.cpu),
		"requests.memory": pulumi.String(cfg.memory),
		"limits.memory":   pulumi.String(cfg.memory),
	}
	for _, class := range cfg.classes {
		hard[DeviceQuotaKey(class)] = pulumi.String(fmt.Sprint(cfg.quota[class]))
	}
	quota, err := corev1.NewResourceQuota(ctx, name+"-quota", &corev1.ResourceQuotaArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("tenant-quota"), Namespace: namespace, Labels: managedLabels(nil)},
		Spec:     &corev1.ResourceQuotaSpecArgs{Hard: hard},
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating ResourceQuota in %q: %w", Namespace(cfg.name), err)
	}
	limits, err := corev1.NewLimitRange(ctx, name+"-limits", &corev1.LimitRangeArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("container-defaults"), Namespace: namespace, Labels: managedLabels(nil)},
		Spec: &corev1.LimitRangeSpecArgs{Limits: corev1.LimitRangeItemArray{corev1.LimitRangeItemArgs{
			Type:           pulumi.String("Container"),
			DefaultRequest: resourceMap(cfg.defaultRequest),
			Default:        resourceMap(cfg.defaultLimit),
		}}},
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating LimitRange in %q: %w", Namespace(cfg.name), err)
	}
	return []pulumi.Resource{quota, limits}, nil
}

// DeviceQuotaKey is the ResourceQuota key that caps the devices of one DeviceClass (gpu-facts 5.3).
func DeviceQuotaKey(class string) string {
	return class + ".deviceclass.resource.k8s.io/devices"
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
