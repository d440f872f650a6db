package tenancy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	resourcev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/resource/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	k8smeta "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CatalogArgs configure the GPU catalog.
type CatalogArgs struct {
	// Classes are the GPU classes.
	Classes []GPUClass
	// Grants maps each tenant to the class names granted to it; the grants are declared on the tenants and handed
	// down here, so each DeviceClass can be labelled for the tenants that may see it.
	Grants map[string][]string
	// Admission configures the cluster-wide guards.
	Admission AdmissionArgs
	// ExtendedResourceClasses are the classes whose DeviceClass carries the class's extended-resource name
	// (GPUClass.ResourceName): those granted to a tenant that asks for GPUs by name, on a cluster whose version
	// serves the field. The caller decides both.
	ExtendedResourceClasses []string
}

// AdmissionArgs configure the cluster-wide admission guards; a stack's `admission` block decodes into them.
type AdmissionArgs struct {
	// PlatformNamespaces may claim catalog and driver classes although they are no tenant's: the platform team's
	// own GPU workloads.
	PlatformNamespaces []string `json:"platformNamespaces"`
	// ClaimStatusWriters are the users allowed to allocate and reserve ResourceClaims. The caller gives the cluster's
	// own writers (cluster.Cluster.ClaimStatusWriters) plus any a stack adds.
	ClaimStatusWriters []string `json:"claimStatusWriters"`
	// RuntimeClasses are the RuntimeClasses tenant pods may name; none by default. No NVIDIA runtime class may be
	// one of them.
	RuntimeClasses []string `json:"runtimeClasses"`
	// PriorityClasses are PriorityClasses tenant pods may name whatever their value; none by default. The
	// system-critical classes may not be one of them.
	PriorityClasses []string `json:"priorityClasses"`
	// MaxTenantPriority is the highest priority a tenant pod may have through any other class (its vCluster's own,
	// or the cluster's default class), and the highest value of a PriorityClass a tenant's vCluster may write; nil
	// takes DefaultMaxTenantPriority.
	MaxTenantPriority *int `json:"maxTenantPriority"`
	// Schedulers are schedulers tenant pods may name besides default-scheduler, such as the one a managed cluster's
	// webhook sets (GKE's optimize-utilization profile: gke.io/optimize-utilization-scheduler); each must apply node
	// taints as the default scheduler does.
	Schedulers []string `json:"schedulers"`
	// TolerableTaints are node taint keys tenant pods may tolerate besides the GPU pools' own (GPUTaints) and those
	// Kubernetes gives pods itself (DefaultTolerableTaints); never MaintenanceTaint.
	TolerableTaints []string `json:"tolerableTaints"`
	// TolerableDeviceTaints are device taint keys (KEP-5055) tenant claims may tolerate; none by default.
	TolerableDeviceTaints []string `json:"tolerableDeviceTaints"`
	// GPUTaints are the keys of the GPU pools' taints, which GPU workloads tolerate; the caller gives the cluster's.
	GPUTaints []string `json:"-"`
	// ControllerNamespaces hold the platform's own controllers (the DRA driver, vCluster Platform): their service
	// accounts' API requests are served ahead of the tenants' (FlowSchema ControllersFlowSchema).
	ControllerNamespaces []string `json:"-"`
}

// maxUserPriority is the highest value of a PriorityClass that is not a system one.
const maxUserPriority = 1_000_000_000

// DefaultControllerNamespaces are where the platform's controllers run unless a stack moves them.
var DefaultControllerNamespaces = []string{naming.DriverNamespace, naming.PlatformNamespace}

// WithDefaults fills in the controller namespaces and the tenants' priority band.
func (a AdmissionArgs) WithDefaults() AdmissionArgs {
	if len(a.ControllerNamespaces) == 0 {
		a.ControllerNamespaces = slices.Clone(DefaultControllerNamespaces)
	}
	if a.MaxTenantPriority == nil {
		max := DefaultMaxTenantPriority
		a.MaxTenantPriority = &max
	}
	return a
}

// tolerableTaints are every node taint key tenant pods may tolerate.
func (a AdmissionArgs) tolerableTaints() []string {
	return uniqueSorted(slices.Concat(a.GPUTaints, DefaultTolerableTaints, a.TolerableTaints))
}

// Catalog is the platform's GPU catalog on the host cluster: the DeviceClasses and the cluster-wide admission guards.
type Catalog struct {
	pulumi.ResourceState

	// DeviceClasses are the created DeviceClasses by class name.
	DeviceClasses map[string]*resourcev1.DeviceClass
	// ClassNames are the class names in catalog order.
	ClassNames pulumi.StringArrayOutput
	// Guards are the bindings of the cluster-wide guards; a tenant namespace must not exist before them.
	Guards []pulumi.Resource
	// Admission are the admission settings (after defaults) every tenant's own policies share.
	Admission AdmissionArgs
}

// Validate checks the classes, that every grant names a class of the catalog, and the admission settings.
func (a *CatalogArgs) Validate(path *field.Path) field.ErrorList {
	errs := ValidateClasses(path.Child("classes"), a.Classes)
	errs = append(errs, ValidateClassOwners(path.Child("classes"), a.Classes, a.Grants)...)
	for _, tenant := range slices.Sorted(maps.Keys(a.Grants)) {
		tp := path.Child("grants").Key(tenant)
		errs = append(errs, ValidateTenantName(tp, tenant)...)
		errs = append(errs, ValidateGrant(tp, a.Grants[tenant], a.Classes)...)
	}
	errs = append(errs, ValidateGrant(path.Child("extendedResourceClasses"), a.ExtendedResourceClasses, a.Classes)...)
	errs = append(errs, a.Admission.Validate(path.Child("admission"), slices.Collect(maps.Keys(a.Grants)))...)
	if len(a.Admission.ClaimStatusWriters) == 0 {
		errs = append(errs, field.Required(path.Child("admission", "claimStatusWriters"),
			"the users that allocate claims (the scheduler) and release them (the resource-claim controller)"))
	}
	return errs
}

// Validate checks the admission settings against the tenants: a platform namespace must not be a tenant's host
// namespace, and no tenant identity may write claim status.
func (a AdmissionArgs) Validate(path *field.Path, tenants []string) field.ErrorList {
	var errs field.ErrorList
	for i, ns := range a.PlatformNamespaces {
		p := path.Child("platformNamespaces").Index(i)
		errs = append(errs, fieldcheck.DNSLabel(p, ns, validation.DNS1123LabelMaxLength)...)
		if strings.HasPrefix(ns, naming.NamespacePrefix) {
			errs = append(errs, field.Invalid(p, ns, fmt.Sprintf(
				"names starting with %s are tenant host namespaces (%s<tenant>), which claim only their grant", naming.NamespacePrefix, naming.NamespacePrefix)))
		}
		if slices.Contains(a.PlatformNamespaces[:i], ns) {
			errs = append(errs, field.Duplicate(p, ns))
		}
	}
	errs = append(errs, validateObjectNames(path.Child("runtimeClasses"), a.RuntimeClasses, func(name string) string {
		if strings.Contains(strings.ToLower(name), "nvidia") {
			return "the NVIDIA runtime classes give a container every GPU its image asks for, outside DRA"
		}
		return ""
	})...)
	errs = append(errs, validateObjectNames(path.Child("priorityClasses"), a.PriorityClasses, func(name string) string {
		if strings.HasPrefix(name, "system-") {
			return "system priority classes preempt every other tenant's pods and are the last a node evicts"
		}
		return ""
	})...)
	// Scheduler names take a prefix, as GKE's gke.io/optimize-utilization-scheduler does.
	for i, name := range a.Schedulers {
		p := path.Child("schedulers").Index(i)
		for _, msg := range validation.IsQualifiedName(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
		if slices.Contains(a.Schedulers[:i], name) {
			errs = append(errs, field.Duplicate(p, name))
		}
	}
	// A user-defined PriorityClass may not exceed 1e9 (kubernetes v1.34.4 pkg/apis/scheduling/validation).
	if p := a.MaxTenantPriority; p != nil && *p > maxUserPriority {
		errs = append(errs, field.Invalid(path.Child("maxTenantPriority"), *p, fmt.Sprintf("must be at most %d, the highest user priority", maxUserPriority)))
	}
	errs = append(errs, validateTaintKeys(path.Child("tolerableTaints"), a.TolerableTaints, map[string]string{
		MaintenanceTaint: "it keeps tenant pods off nodes under maintenance or quarantine: no tenant may tolerate it",
		naming.DedicatedNodeKey: "it keeps every other tenant off the pools dedicated to a tenant (gpuPools[].tenant): " +
			"only that tenant's pods may tolerate it, with their own tenant's name",
		naming.PlatformPoolKey: "it keeps tenant pods off the platform's own pool (gke.tenantPool, scaleway.tenantPool, " +
			"existing.platformPool), beside the platform's controllers: no tenant may tolerate it",
	})...)
	errs = append(errs, validateTaintKeys(path.Child("tolerableDeviceTaints"), a.TolerableDeviceTaints, nil)...)
	for i, w := range a.ClaimStatusWriters {
		p := path.Child("claimStatusWriters").Index(i)
		switch {
		case strings.TrimSpace(w) != w || w == "":
			errs = append(errs, field.Invalid(p, w, "must be a Kubernetes user name such as system:kube-scheduler"))
		case strings.HasPrefix(w, "system:serviceaccount:"+naming.NamespacePrefix):
			errs = append(errs, field.Invalid(p, w, fmt.Sprintf(
				"is a service account of a tenant host namespace (%s<tenant>): tenants must never allocate devices themselves", naming.NamespacePrefix)))
		case slices.Contains(a.ClaimStatusWriters[:i], w):
			errs = append(errs, field.Duplicate(p, w))
		}
	}
	return errs
}

// validateObjectNames checks names of cluster objects (DNS subdomains), once each, none that refused explains.
func validateObjectNames(path *field.Path, names []string, refused func(string) string) field.ErrorList {
	var errs field.ErrorList
	for i, name := range names {
		p := path.Index(i)
		errs = append(errs, fieldcheck.DNSSubdomain(p, name, validation.DNS1123SubdomainMaxLength)...)
		if why := refused(name); why != "" {
			errs = append(errs, field.Invalid(p, name, why))
		}
		if slices.Contains(names[:i], name) {
			errs = append(errs, field.Duplicate(p, name))
		}
	}
	return errs
}

// validateTaintKeys checks taint keys (qualified names), once each; an empty key would tolerate every taint.
func validateTaintKeys(path *field.Path, keys []string, refused map[string]string) field.ErrorList {
	var errs field.ErrorList
	for i, key := range keys {
		p := path.Index(i)
		if key == "" {
			errs = append(errs, field.Required(p, "a taint key: an empty key tolerates every taint"))
			continue
		}
		for _, msg := range validation.IsQualifiedName(key) {
			errs = append(errs, field.Invalid(p, key, msg))
		}
		if why, ok := refused[key]; ok {
			errs = append(errs, field.Invalid(p, key, why))
		}
		if slices.Contains(keys[:i], key) {
			errs = append(errs, field.Duplicate(p, key))
		}
	}
	return errs
}

func uniqueSorted(items []string) []string {
	out := slices.Clone(items)
	slices.Sort(out)
	return slices.Compact(out)
}

// ValidateGrant checks a tenant's granted class names (at path) against the catalog's classes: each exists, once.
func ValidateGrant(path *field.Path, granted []string, classes []GPUClass) field.ErrorList {
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = c.Name
	}
	var errs field.ErrorList
	for j, class := range granted {
		switch {
		case !slices.Contains(names, class):
			errs = append(errs, field.NotSupported(path.Index(j), class, names))
		case slices.Contains(granted[:j], class):
			errs = append(errs, field.Duplicate(path.Index(j), class))
		}
	}
	return errs
}

// ValidateClassOwners checks that each class (at path[i]) is granted to a tenant or marked platformOnly, never both.
func ValidateClassOwners(path *field.Path, classes []GPUClass, grants map[string][]string) field.ErrorList {
	var errs field.ErrorList
	for i, c := range classes {
		tenants := tenantsOf(grants, c.Name)
		switch {
		case c.PlatformOnly && len(tenants) > 0:
			errs = append(errs, field.Invalid(path.Index(i).Child("platformOnly"), true, fmt.Sprintf(
				"class %s is granted to %s: a platform-only class is granted to no tenant", c.Name, strings.Join(tenants, ", "))))
		case !c.PlatformOnly && len(tenants) == 0:
			errs = append(errs, field.Required(path.Index(i), fmt.Sprintf(
				"class %s is granted to no tenant: grant it to one, or mark it platformOnly: true for platform namespaces", c.Name)))
		}
	}
	return errs
}

// tenantsOf lists the tenants granted class, sorted.
func tenantsOf(grants map[string][]string, class string) []string {
	var out []string
	for tenant, classes := range grants {
		if slices.Contains(classes, class) {
			out = append(out, tenant)
		}
	}
	slices.Sort(out)
	return out
}

// NewCatalog creates the DeviceClasses, the cluster-wide guards and the platform controllers' flow schema: claims of GPU
// classes only in tenant host namespaces, the tenant label only on those, claim status written only by the scheduler
// and the resource-claim controller, and in tenant namespaces no path to a GPU outside DRA, pods placed by the
// scheduler within the taints and priorities the platform allows, no device released while a container may hold it,
// and no Service capturing others' traffic; each tenant's claims only of the classes its namespace's labels grant.
// Each tenant (NewTenant) adds its own flow schema and priority level.
func NewCatalog(ctx *pulumi.Context, name string, args *CatalogArgs, opts ...pulumi.ResourceOption) (*Catalog, error) {
	if args == nil {
		return nil, errors.New("creating GPU catalog: args are required")
	}
	if errs := args.Validate(field.NewPath("catalog")); len(errs) > 0 {
		return nil, fmt.Errorf("creating GPU catalog %q: %w", name, errs.ToAggregate())
	}
	admission := args.Admission.WithDefaults()
	c := &Catalog{DeviceClasses: map[string]*resourcev1.DeviceClass{}, Admission: admission}
	if err := ctx.RegisterComponentResource("gpu-tenancy:tenancy:Catalog", name, c, opts...); err != nil {
		return nil, fmt.Errorf("registering GPU catalog %q: %w", name, err)
	}

	names := make([]string, 0, len(args.Classes))
	named, resourceNames := map[string]string{}, map[string]string{}
	// The names the catalog's classes may carry, asked for or not: the class guard's list changes only with the
	// catalog, never in the up where a tenant starts asking for a class by name and the class takes its name, since
	// the API server applies a changed policy a moment after it is written and would refuse the class meanwhile.
	carried := map[string]string{}
	for _, class := range args.Classes {
		names = append(names, class.Name)
		carried[class.ResourceName()] = class.Name
		if slices.Contains(args.ExtendedResourceClasses, class.Name) {
			named[class.ResourceName()], resourceNames[class.Name] = class.Name, class.ResourceName()
		}
	}
	var classGuard pulumi.Resource
	for _, g := range guards(names, named, carried, admission) {
		binding, err := newPolicy(ctx, name+"-"+g.suffix, g.policy, selectorArgs(g.NamespaceSelector), c)
		if err != nil {
			return nil, err
		}
		c.Guards = append(c.Guards, binding)
		if g.Name == ExtendedResourceClassPolicy {
			classGuard = binding
		}
	}
	for _, class := range args.Classes {
		// After the guard that checks the classes' names, so a renamed class meets the guard that knows its name.
		dc, err := newDeviceClass(ctx, name, class, resourceNames[class.Name], tenantsOf(args.Grants, class.Name), c,
			pulumi.DependsOn([]pulumi.Resource{classGuard}))
		if err != nil {
			return nil, err
		}
		c.DeviceClasses[class.Name] = dc
	}

	if err := newControllersFlowSchema(ctx, name, admission.ControllerNamespaces, c); err != nil {
		return nil, err
	}
	if err := newLentSeats(ctx, name, c); err != nil {
		return nil, err
	}

	c.ClassNames = pulumi.ToStringArray(names).ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{"classNames": c.ClassNames}); err != nil {
		return nil, fmt.Errorf("registering GPU catalog %q outputs: %w", name, err)
	}
	return c, nil
}

// Guard is one of the catalog's cluster-wide guards: a ValidatingAdmissionPolicy and its binding, both named Name,
// bound with Deny to the namespaces NamespaceSelector selects (nil: every namespace).
type Guard struct {
	Name              string
	NamespaceSelector *k8smeta.LabelSelector
	// suffix names the guard's resources in the program (<catalog>-<suffix>).
	suffix string
	policy admissionPolicy
}

// guards are the catalog's guards for its class names, the extended-resource names its DeviceClasses carry (each to
// its class) and admission settings (after defaults).
func guards(classes []string, named, carried map[string]string, admission AdmissionArgs) []Guard {
	g := func(suffix string, policy admissionPolicy, selector *k8smeta.LabelSelector) Guard {
		return Guard{Name: policy.name, NamespaceSelector: selector, suffix: suffix, policy: policy}
	}
	tenantNamespaces := &k8smeta.LabelSelector{MatchExpressions: []k8smeta.LabelSelectorRequirement{
		{Key: naming.TenantNamespaceLabel, Operator: k8smeta.LabelSelectorOpExists}}}
	var exceptPlatform *k8smeta.LabelSelector
	if len(admission.PlatformNamespaces) > 0 {
		exceptPlatform = &k8smeta.LabelSelector{MatchExpressions: []k8smeta.LabelSelectorRequirement{
			{Key: namespaceNameLabel, Operator: k8smeta.LabelSelectorOpNotIn, Values: slices.Clone(admission.PlatformNamespaces)}}}
	}
	// Tenant namespaces whose grants are labels: every tenant namespace this version creates. A namespace of an
	// earlier version keeps its per-tenant policy until the update that labels it also removes that policy.
	granted := &k8smeta.LabelSelector{MatchLabels: map[string]string{naming.GrantsLabel: "true"},
		MatchExpressions: tenantNamespaces.MatchExpressions}
	return []Guard{
		g("entitlements", entitlementPolicy(admission.TolerableDeviceTaints), granted),
		g("claim-namespaces", claimNamespacePolicy(classes), exceptPlatform),
		g("namespace-label", namespaceLabelPolicy, nil),
		g("claim-status", claimStatusPolicy(admission.ClaimStatusWriters), nil),
		g("runtime-env", runtimeEnvPolicy, tenantNamespaces),
		g("runtime-env-keys", runtimeEnvKeysPolicy, tenantNamespaces),
		g("extended-resources", extendedResourcePolicy(named), tenantNamespaces),
		g("extended-resource-claims", extendedResourceClaimPolicy(admission.ClaimStatusWriters), tenantNamespaces),
		g("extended-resource-classes", extendedResourceClassPolicy(carried), nil),
		g("node-device-paths", nodeDevicePolicy(admission.RuntimeClasses), tenantNamespaces),
		g("pod-placement", podPlacementPolicy(admission.tolerableTaints(), admission.PriorityClasses, admission.Schedulers,
			*admission.MaxTenantPriority), tenantNamespaces),
		g("priority-classes", priorityClassPolicy(*admission.MaxTenantPriority, admission.ControllerNamespaces), nil),
		g("pod-phase", podPhasePolicy, tenantNamespaces),
		g("pod-graceful-delete", gracefulDeletePolicy, tenantNamespaces),
		g("claim-delete-protection", claimDeleteProtectionPolicy, tenantNamespaces),
		g("service-external-ips", servicePolicy, tenantNamespaces),
		g("endpoint-size", endpointsPolicy, tenantNamespaces),
		g("event-size", eventSizePolicy, tenantNamespaces),
		g("node-placement-labels", nodeLabelPolicy, nil),
		g("volume-claims", volumeClaimPolicy, tenantNamespaces),
		g("pod-volume-types", podVolumeTypesPolicy, tenantNamespaces),
		g("claim-shape", claimShapePolicy, tenantNamespaces),
		g("kubeconfig-secret", kubeconfigSecretPolicy, tenantNamespaces),
	}
}

// Guards are the catalog's guards for the admission settings, as a check of the cluster compares them: names and the
// namespaces each binding selects.
func Guards(admission AdmissionArgs) []Guard { return guards(nil, nil, nil, admission.WithDefaults()) }

// selectorArgs is a label selector as the kubernetes SDK's args; nil stays nil.
func selectorArgs(s *k8smeta.LabelSelector) *metav1.LabelSelectorArgs {
	if s == nil {
		return nil
	}
	args := &metav1.LabelSelectorArgs{}
	if len(s.MatchLabels) > 0 {
		args.MatchLabels = pulumi.ToStringMap(s.MatchLabels)
	}
	var reqs metav1.LabelSelectorRequirementArray
	for _, e := range s.MatchExpressions {
		req := metav1.LabelSelectorRequirementArgs{Key: pulumi.String(e.Key), Operator: pulumi.String(string(e.Operator))}
		if len(e.Values) > 0 {
			req.Values = pulumi.ToStringArray(e.Values)
		}
		reqs = append(reqs, req)
	}
	if len(reqs) > 0 {
		args.MatchExpressions = reqs
	}
	return args
}

// ClusterObjects are the cluster-scoped objects NewCatalog and NewTenant create for these classes and tenants, so a
// caller can check, before creating anything, that none of them belongs to someone else.
func ClusterObjects(classes []GPUClass, tenants []string) []naming.ObjectRef {
	return append(CatalogObjects(classes), TenantObjects(tenants)...)
}

// CatalogObjects are the cluster-scoped objects NewCatalog creates.
func CatalogObjects(classes []GPUClass) []naming.ObjectRef {
	var refs []naming.ObjectRef
	for _, c := range classes {
		refs = append(refs, naming.ObjectRef{Kind: naming.KindDeviceClass, Name: c.Name})
	}
	for _, g := range guards(nil, nil, nil, AdmissionArgs{}.WithDefaults()) {
		refs = append(refs, naming.ObjectRef{Kind: naming.KindPolicy, Name: g.Name}, naming.ObjectRef{Kind: naming.KindPolicyBinding, Name: g.Name})
	}
	return append(refs, naming.ObjectRef{Kind: naming.KindFlowSchema, Name: ControllersFlowSchema},
		naming.ObjectRef{Kind: naming.KindPriorityLevel, Name: LentSeatsPriorityLevel})
}

// TenantObjects are the cluster-scoped objects NewTenant creates for these tenants.
func TenantObjects(tenants []string) []naming.ObjectRef {
	var refs []naming.ObjectRef
	for _, t := range tenants {
		refs = append(refs, naming.ObjectRef{Kind: naming.KindNamespace, Name: naming.Namespace(t)},
			naming.ObjectRef{Kind: naming.KindFlowSchema, Name: naming.TenantFlowSchema(t)},
			naming.ObjectRef{Kind: naming.KindPriorityLevel, Name: naming.TenantPriorityLevel(t)})
	}
	return refs
}

// ExternalCatalog is the catalog of a platform stack as a tenant group's stack sees it: the admission settings its
// tenants' policies share. Its objects are the platform stack's, which comes up first, so nothing here depends on
// them.
func ExternalCatalog(admission AdmissionArgs) *Catalog {
	return &Catalog{Admission: admission.WithDefaults()}
}

// newDeviceClass creates a class's DeviceClass, labelled for each granted tenant so its vCluster syncs it, or as
// platform-only, with its extended-resource name when resourceName is set.
func newDeviceClass(ctx *pulumi.Context, name string, class GPUClass, resourceName string, tenants []string, parent pulumi.Resource,
	opts ...pulumi.ResourceOption) (*resourcev1.DeviceClass, error) {
	grants := map[string]string{}
	for _, t := range tenants {
		grants[naming.ClassTenantLabel(t)] = "true"
	}
	if class.PlatformOnly {
		grants[naming.PlatformOnlyLabel] = "true"
	}
	spec := &resourcev1.DeviceClassSpecArgs{
		Selectors: resourcev1.DeviceSelectorArray{
			resourcev1.DeviceSelectorArgs{Cel: &resourcev1.CELDeviceSelectorArgs{Expression: pulumi.String(class.CEL())}},
		},
	}
	if resourceName != "" {
		spec.ExtendedResourceName = pulumi.String(resourceName)
	}
	dc, err := resourcev1.NewDeviceClass(ctx, name+"-"+class.Name, &resourcev1.DeviceClassArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(class.Name), Labels: managedLabels(grants)},
		Spec:     spec,
	}, append([]pulumi.ResourceOption{pulumi.Parent(parent)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating DeviceClass %q: %w", class.Name, err)
	}
	return dc, nil
}
