package tenancy

import (
	"errors"
	"fmt"
	"slices"

	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	resourcev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/resource/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// CatalogArgs configure the GPU catalog.
type CatalogArgs struct {
	// Classes are the GPU classes, each with the tenants granted it.
	Classes []GPUClass
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

	classes []GPUClass
}

// grantedTo names the classes granted to tenant, in catalog order.
func grantedTo(classes []GPUClass, tenant string) []string {
	var out []string
	for _, cl := range classes {
		if slices.Contains(cl.Tenants, tenant) {
			out = append(out, cl.Name)
		}
	}
	return out
}

// ValidateClasses reports every problem with a list of classes: each class's own, and names used twice.
func ValidateClasses(classes []GPUClass) error {
	var errs []error
	seen := map[string]bool{}
	for _, c := range classes {
		if err := c.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[c.Name] {
			errs = append(errs, fmt.Errorf("GPU class %q is defined twice", c.Name))
		}
		seen[c.Name] = true
	}
	return errors.Join(errs...)
}

// NewCatalog creates the DeviceClasses, the system namespace for grants and the static admission policies. Tenants
// (NewTenant) bind the entitlement policy to their own namespace and grants.
func NewCatalog(ctx *pulumi.Context, name string, args *CatalogArgs, opts ...pulumi.ResourceOption) (*Catalog, error) {
	if args == nil {
		return nil, errors.New("creating GPU catalog: args are required")
	}
	if err := ValidateClasses(args.Classes); err != nil {
		return nil, fmt.Errorf("creating GPU catalog %q: %w", name, err)
	}
	c := &Catalog{classes: slices.Clone(args.Classes), DeviceClasses: map[string]*resourcev1.DeviceClass{}}
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
		dc, err := newDeviceClass(ctx, name, class, c)
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
func newDeviceClass(ctx *pulumi.Context, name string, class GPUClass, parent pulumi.Resource) (*resourcev1.DeviceClass, error) {
	grants := map[string]string{}
	for _, t := range class.Tenants {
		grants[ClassTenantLabel(t)] = "true"
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
						Key: pulumi.String(TenantNamespaceLabel), Operator: pulumi.String("Exists"),
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
