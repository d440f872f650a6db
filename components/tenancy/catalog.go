package tenancy

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	resourcev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/resource/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CatalogArgs configure the GPU catalog.
type CatalogArgs struct {
	// Classes are the GPU classes.
	Classes []GPUClass
	// Grants maps each tenant to the class names granted to it; the grants are declared on the tenants and handed
	// down here, so each DeviceClass can be labelled for the tenants that may see it.
	Grants map[string][]string
}

// Catalog is the platform's GPU catalog on the host cluster: the DeviceClasses, the namespace that holds tenants'
// grants, and the admission policies tenants are bound to.
type Catalog struct {
	pulumi.ResourceState

	// SystemNamespace holds the tenants' grants ConfigMaps.
	SystemNamespace pulumi.StringOutput
	// EntitlementPolicy is the name of the claim entitlement policy each tenant binds.
	EntitlementPolicy pulumi.StringOutput
	// DeviceClasses are the created DeviceClasses by class name.
	DeviceClasses map[string]*resourcev1.DeviceClass
	// ClassNames are the class names in catalog order.
	ClassNames pulumi.StringArrayOutput
}

// Validate checks the classes and that every grant names a class of the catalog.
func (a *CatalogArgs) Validate(path *field.Path) field.ErrorList {
	errs := ValidateClasses(path.Child("classes"), a.Classes)
	for _, tenant := range slices.Sorted(maps.Keys(a.Grants)) {
		tp := path.Child("grants").Key(tenant)
		errs = append(errs, ValidateTenantName(tp, tenant)...)
		errs = append(errs, ValidateGrant(tp, a.Grants[tenant], a.Classes)...)
	}
	return errs
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

// NewCatalog creates the DeviceClasses, the system namespace for grants and the static admission policies. Tenants
// (NewTenant) bind the entitlement policy to their own namespace and grants.
func NewCatalog(ctx *pulumi.Context, name string, args *CatalogArgs, opts ...pulumi.ResourceOption) (*Catalog, error) {
	if args == nil {
		return nil, errors.New("creating GPU catalog: args are required")
	}
	if errs := args.Validate(field.NewPath("catalog")); len(errs) > 0 {
		return nil, fmt.Errorf("creating GPU catalog %q: %w", name, errs.ToAggregate())
	}
	c := &Catalog{DeviceClasses: map[string]*resourcev1.DeviceClass{}}
	if err := ctx.RegisterComponentResource("gpu-tenancy:tenancy:Catalog", name, c, opts...); err != nil {
		return nil, fmt.Errorf("registering GPU catalog %q: %w", name, err)
	}

	ns, err := corev1.NewNamespace(ctx, name+"-system", &corev1.NamespaceArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(SystemNamespace), Labels: managedLabels(nil)},
	}, pulumi.Parent(c))
	if err != nil {
		return nil, fmt.Errorf("creating namespace %q: %w", SystemNamespace, err)
	}

	names := make([]string, 0, len(args.Classes))
	for _, class := range args.Classes {
		dc, err := newDeviceClass(ctx, name, class, tenantsOf(args.Grants, class.Name), c)
		if err != nil {
			return nil, err
		}
		c.DeviceClasses[class.Name] = dc
		names = append(names, class.Name)
	}

	policy, err := admissionv1.NewValidatingAdmissionPolicy(ctx, name+"-entitlements", entitlementPolicy.args(), pulumi.Parent(c))
	if err != nil {
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicy %q: %w", EntitlementPolicyName, err)
	}
	if err := newExtendedResourceGuard(ctx, name, c); err != nil {
		return nil, err
	}

	c.SystemNamespace = ns.Metadata.Name().Elem()
	c.EntitlementPolicy = policy.Metadata.Name().Elem()
	c.ClassNames = pulumi.ToStringArray(names).ToStringArrayOutput()
	if err := ctx.RegisterResourceOutputs(c, pulumi.Map{
		"systemNamespace":   c.SystemNamespace,
		"entitlementPolicy": c.EntitlementPolicy,
		"classNames":        c.ClassNames,
	}); err != nil {
		return nil, fmt.Errorf("registering GPU catalog %q outputs: %w", name, err)
	}
	return c, nil
}

// newDeviceClass creates a class's DeviceClass, labelled for each granted tenant so its vCluster syncs it.
func newDeviceClass(ctx *pulumi.Context, name string, class GPUClass, tenants []string, parent pulumi.Resource) (*resourcev1.DeviceClass, error) {
	grants := map[string]string{}
	for _, t := range tenants {
		grants[naming.ClassTenantLabel(t)] = "true"
	}
	dc, err := resourcev1.NewDeviceClass(ctx, name+"-"+class.Name, &resourcev1.DeviceClassArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(class.Name), Labels: managedLabels(grants)},
		Spec: &resourcev1.DeviceClassSpecArgs{
			Selectors: resourcev1.DeviceSelectorArray{
				resourcev1.DeviceSelectorArgs{Cel: &resourcev1.CELDeviceSelectorArgs{Expression: pulumi.String(class.CEL())}},
			},
		},
	}, pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating DeviceClass %q: %w", class.Name, err)
	}
	return dc, nil
}

// newExtendedResourceGuard creates the extended-resource policy and binds it to every tenant namespace at once: it has
// no per-tenant data.
func newExtendedResourceGuard(ctx *pulumi.Context, name string, parent pulumi.Resource) error {
	policy, err := admissionv1.NewValidatingAdmissionPolicy(ctx, name+"-extended-resources", extendedResourcePolicy.args(), pulumi.Parent(parent))
	if err != nil {
		return fmt.Errorf("creating ValidatingAdmissionPolicy %q: %w", ExtendedResourcePolicyName, err)
	}
	_, err = admissionv1.NewValidatingAdmissionPolicyBinding(ctx, name+"-extended-resources", &admissionv1.ValidatingAdmissionPolicyBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(ExtendedResourcePolicyName), Labels: managedLabels(nil)},
		Spec: &admissionv1.ValidatingAdmissionPolicyBindingSpecArgs{
			PolicyName:        policy.Metadata.Name().Elem(),
			ValidationActions: pulumi.ToStringArray([]string{"Deny"}),
			MatchResources: &admissionv1.MatchResourcesArgs{
				NamespaceSelector: &metav1.LabelSelectorArgs{
					MatchExpressions: metav1.LabelSelectorRequirementArray{metav1.LabelSelectorRequirementArgs{
						Key: pulumi.String(naming.TenantNamespaceLabel), Operator: pulumi.String("Exists"),
					}},
				},
			},
		},
	}, pulumi.Parent(parent))
	if err != nil {
		return fmt.Errorf("creating ValidatingAdmissionPolicyBinding %q: %w", ExtendedResourcePolicyName, err)
	}
	return nil
}
