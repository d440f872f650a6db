package platform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Type is the component's type token; a component provider serves it under the same name.
const Type = "gpu-tenancy:index:Platform"

// Platform is the whole platform on one cluster. Its outputs are what the gpu-tenancy program exports.
type Platform struct {
	pulumi.ResourceState

	// Tenants maps each tenant to its namespace, classes, kubeconfigSecret and (while vcluster.await is on) its
	// kubeconfig, which is secret.
	Tenants pulumi.MapOutput `pulumi:"tenants"`
	// Kubeconfig reaches the host cluster; always secret.
	Kubeconfig pulumi.StringOutput `pulumi:"kubeconfig"`
	// Flavour is where the cluster comes from: gke, scaleway or existing.
	Flavour pulumi.StringOutput `pulumi:"flavour"`
}

// NewPlatform validates the complete args, defaults applied, with every component's rules, then checks that an
// existing cluster holds no object of another owner, and registers nothing unless both pass. Then it builds, in order,
// the cluster, the DRA driver, vCluster Platform, the GPU catalog, monitoring and, in parallel, the tenants: each step
// takes what the previous one returned, and tenants depend on the catalog and the platform, never on each other. In
// an environment split into tenant groups, the platform part builds all but the tenants, and a tenants part only its
// group's tenants, on the cluster the platform part manages (parts.go).
func NewPlatform(ctx *pulumi.Context, name string, args *PlatformArgs, opts ...pulumi.ResourceOption) (*Platform, error) {
	if args == nil {
		return nil, errors.New("creating the GPU tenancy platform: args are required")
	}
	a := args.WithDefaults()
	baseDir := a.BaseDir
	if baseDir == "" {
		baseDir = ctx.RootDirectory()
	}
	a.part = PartOf(ctx.Stack(), a.TenantGroups)
	// Paths are resolved first, so that what is validated is what is built.
	errs := a.resolvePaths(baseDir)
	if errs = append(errs, a.Validate()...); len(errs) > 0 {
		return nil, &ArgsError{Keys: a.Keys, Errs: errs}
	}
	if first, dup := constructed.LoadOrStore(ctx, name); dup {
		return nil, fmt.Errorf("creating the GPU tenancy platform %q: this program already has one, %q: a cluster holds one "+
			"platform (DeviceClasses and admission policies have cluster-wide names), and a program builds one; give "+
			"another cluster a stack of its own", name, first)
	}
	owner, err := owner(ctx.Project(), ctx.Stack())
	if err != nil {
		return nil, err
	}
	platformStack := a.platformStack(ctx.Stack())
	buildsPlatform, tenants := a.builds()
	var kubeconfig string
	if a.Cloud == cluster.Existing {
		if kubeconfig, err = a.existingKubeconfig(); err != nil {
			return nil, err
		}
		warn := func(msg string) { _ = ctx.Log.Warn(msg, nil) }
		if err := checkExistingCluster(ctx.Context(), &a, kubeconfig, owner, warn); err != nil {
			return nil, err
		}
	}

	p := &Platform{}
	if err := ctx.RegisterComponentResource(Type, name, p, opts...); err != nil {
		return nil, fmt.Errorf("registering the GPU tenancy platform %q: %w", name, err)
	}
	// Every child keeps the URN it had when the program registered it at the top level, before this component
	// existed; the engine gives the children's own children the same alias.
	top := []pulumi.ResourceOption{pulumi.Parent(p), pulumi.Aliases([]pulumi.Alias{{NoParent: pulumi.Bool(true)}})}
	var cl *cluster.Cluster
	if buildsPlatform {
		cl, err = a.newCluster(ctx, kubeconfig, top)
	} else {
		cl, err = a.referencedCluster(ctx, kubeconfig, platformStack, owner, top)
	}
	if err != nil {
		return nil, err
	}
	cl.Owner, cl.Timeouts = owner, a.Timeouts
	inCluster := append(cl.ResourceOptions(), top...)
	shared := a.tenantShared(cl)
	var afterPlatform []pulumi.Resource
	if buildsPlatform {
		if shared.catalog, afterPlatform, err = a.newShared(ctx, cl, inCluster); err != nil {
			return nil, err
		}
	} else {
		shared.catalog = tenancy.ExternalCatalog(a.admissionArgs(cl.ClaimStatusWriters, cl.GPUTaints()))
	}
	outputs := pulumi.Map{}
	for _, t := range tenants {
		out, err := shared.newTenant(ctx, t, append(inCluster, pulumi.DependsOn(afterPlatform))...)
		if err != nil {
			return nil, err
		}
		outputs[t.Name] = out
	}

	p.Tenants = outputs.ToMapOutput()
	p.Kubeconfig = cl.Kubeconfig
	p.Flavour = pulumi.String(string(cl.Flavour)).ToStringOutput()
	if err := ctx.RegisterResourceOutputs(p, pulumi.Map{"tenants": p.Tenants, "kubeconfig": p.Kubeconfig, "flavour": p.Flavour}); err != nil {
		return nil, fmt.Errorf("registering the outputs of the GPU tenancy platform %q: %w", name, err)
	}
	return p, nil
}

// newShared builds what every tenant shares: the DRA driver, vCluster Platform, the GPU catalog and monitoring. It
// returns the catalog, and what tenants wait for (the platform, to which their vClusters connect).
func (c *PlatformArgs) newShared(ctx *pulumi.Context, cl *cluster.Cluster, inCluster []pulumi.ResourceOption) (*tenancy.Catalog, []pulumi.Resource, error) {
	// The catalog's classes select devices the driver publishes; with the driver in the stack, classes follow it.
	var afterDriver, afterPlatform []pulumi.Resource
	if c.DRAEnabled() {
		driverArgs := c.driverArgs(cl.GPUPools, cl.DriverRoot)
		driver, err := dra.NewDriver(ctx, "dra", &driverArgs, inCluster...)
		if err != nil {
			return nil, nil, fmt.Errorf("creating the NVIDIA DRA driver: %w", err)
		}
		afterDriver = append(afterDriver, driver)
	}
	if c.PlatformInstalled() {
		platformArgs := c.Platform.PlatformArgs
		platformArgs.AdminPassword = secretInput(c.Secrets.PlatformAdminPassword)
		platformArgs.LicenseToken = secretInput(c.Secrets.PlatformLicenseToken)
		platform, err := vcluster.NewPlatform(ctx, "platform", &platformArgs, inCluster...)
		if err != nil {
			return nil, nil, fmt.Errorf("creating vCluster Platform: %w", err)
		}
		afterPlatform = append(afterPlatform, platform)
	}
	catalog, err := tenancy.NewCatalog(ctx, "gpu-catalog", &tenancy.CatalogArgs{
		Classes: c.GPUClasses, Grants: c.Grants(), Admission: c.admissionArgs(cl.ClaimStatusWriters, cl.GPUTaints()),
	}, append(inCluster, pulumi.DependsOn(afterDriver))...)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the GPU catalog: %w", err)
	}
	if c.Monitoring.EnabledFor(cl.Flavour) {
		monitoringArgs := c.monitoringArgs()
		if _, err := monitoring.NewMonitoring(ctx, "monitoring", &monitoringArgs, inCluster...); err != nil {
			return nil, nil, fmt.Errorf("creating monitoring: %w", err)
		}
	}
	return catalog, afterPlatform, nil
}

// tenantShared are the settings every tenant shares but the catalog.
func (c *PlatformArgs) tenantShared(cl *cluster.Cluster) tenantShared {
	shared := tenantShared{
		vcluster:    c.VCluster,
		tolerations: cl.GPUTaints(),
		network: tenancy.NetworkArgs{
			// Cilium gives the API server an identity that ipBlock rules do not match (tenancy.NetworkArgs).
			CiliumAPIServerAccess: cl.Flavour == cluster.Scaleway && c.Scaleway.CNI == "cilium",
		},
	}
	if c.PlatformEnabled() {
		shared.platform = &vcluster.PlatformConnection{Host: c.Platform.Host, Project: vcluster.DefaultProject}
		// The platform proxies to each tenant's vCluster API.
		shared.network.IngressFromNamespaces = []string{vcluster.DefaultPlatformNamespace}
		shared.accessKeys = c.Secrets.PlatformAccessKeys
	}
	return shared
}

// platformStack is the name of the stack that manages the platform of a tenants part's stack, which is named after
// it (PartOf): <platform stack>.<part>, local.tenants-0 for local. Empty for any other part.
func (c *PlatformArgs) platformStack(stack string) string {
	if !isGroup(c.part) {
		return ""
	}
	return strings.TrimSuffix(stack, "."+string(c.part))
}

// referencedCluster is the cluster of a tenants part: an existing cluster's own kubeconfig, already checked for
// owners, or the kubeconfig the platform stack exports for the cloud cluster it manages. That one is known only once
// the stack reference resolves, so the owners are checked there, and the provider every object of the stack uses
// takes the kubeconfig only once the check passed: a group's stack cannot take over another's tenant on a cloud
// cluster either, where the ownership check of a one-stack environment has nothing to meet.
func (c *PlatformArgs) referencedCluster(ctx *pulumi.Context, kubeconfig, platformStack, owner string, opts []pulumi.ResourceOption) (*cluster.Cluster, error) {
	var input pulumi.StringInput = pulumi.String(kubeconfig)
	if c.Cloud != cluster.Existing {
		ref, err := pulumi.NewStackReference(ctx, "platform-stack", &pulumi.StackReferenceArgs{
			Name: pulumi.String(fmt.Sprintf("%s/%s/%s", ctx.Organization(), ctx.Project(), platformStack)),
		}, opts...)
		if err != nil {
			return nil, fmt.Errorf("reading the outputs of the platform stack %s: %w", platformStack, err)
		}
		warn := func(msg string) { _ = ctx.Log.Warn(msg, nil) }
		input = ref.GetStringOutput(pulumi.String("kubeconfig")).ApplyTWithContext(ctx.Context(),
			func(goctx context.Context, k string) (string, error) {
				if err := checkExistingCluster(goctx, c, k, owner, warn); err != nil {
					return "", err
				}
				return k, nil
			}).(pulumi.StringOutput)
	}
	cl, err := cluster.NewReferenced(ctx, string(c.Cloud), &cluster.ReferencedArgs{
		Flavour: c.Cloud, Kubeconfig: input, GPUPools: c.GPUPools(), DriverRoot: c.driverRoot(),
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("reaching the cluster of the platform stack: %w", err)
	}
	return cl.Contract(), nil
}

// driverArgs are the DRA driver's args with what the cluster contract gives; Validate builds them from the pools the
// config declares, NewPlatform from those the cluster returned, which are the same.
func (c *PlatformArgs) driverArgs(pools []cluster.GPUPool, driverRoot string) dra.DriverArgs {
	args := c.DRADriver.DriverArgs
	args.Flavour, args.GPUPools, args.DriverRoot = c.Cloud, pools, driverRoot
	return args
}

// driverRoot is where the cluster's NVIDIA driver lives, as its flavour's contract says.
func (c *PlatformArgs) driverRoot() string {
	switch c.Cloud {
	case cluster.GKE:
		return gke.DriverRoot
	case cluster.Scaleway:
		return scaleway.DriverRoot
	}
	if c.Existing.DriverRoot != "" {
		return c.Existing.DriverRoot
	}
	return cluster.HostDriverRoot
}

// monitoringArgs are the monitoring component's args.
func (c *PlatformArgs) monitoringArgs() monitoring.MonitoringArgs {
	return monitoring.MonitoringArgs{Spec: c.Monitoring, Flavour: c.Cloud, Project: c.GKE.Project,
		DriverNamespace: dra.DefaultNamespace, Prices: c.Prices}
}

// admissionArgs are the catalog's admission settings: the stack's, with the cluster's own claim status writers
// first and the GPU pools' taints.
func (c *PlatformArgs) admissionArgs(writers []string, taints []cluster.Taint) tenancy.AdmissionArgs {
	admission := c.Admission
	admission.ClaimStatusWriters = slices.Clone(writers)
	for _, w := range c.Admission.ClaimStatusWriters {
		if !slices.Contains(admission.ClaimStatusWriters, w) {
			admission.ClaimStatusWriters = append(admission.ClaimStatusWriters, w)
		}
	}
	for _, t := range taints {
		admission.GPUTaints = append(admission.GPUTaints, t.Key)
	}
	return admission
}

// tenantShared is what every tenant shares, computed once by NewPlatform.
type tenantShared struct {
	catalog     *tenancy.Catalog
	network     tenancy.NetworkArgs
	vcluster    vcluster.Settings
	platform    *vcluster.PlatformConnection
	accessKeys  map[string]Secret
	tolerations []cluster.Taint
}

// newTenant builds a tenant's host-side guard rails and, when tenants get one, its vCluster.
func (s *tenantShared) newTenant(ctx *pulumi.Context, t TenantArgs, opts ...pulumi.ResourceOption) (pulumi.Map, error) {
	args := t.TenantArgs
	args.Catalog, args.Network = s.catalog, s.network
	tenant, err := tenancy.NewTenant(ctx, t.Name, &args, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating tenant %q: %w", t.Name, err)
	}
	out := pulumi.Map{"namespace": tenant.Namespace, "classes": tenant.Classes}
	if !s.vcluster.IsEnabled() {
		return out, nil
	}
	vc, err := vcluster.NewVirtualCluster(ctx, t.Name, &vcluster.VirtualClusterArgs{
		Tenant:             t.Name,
		Namespace:          tenant.Namespace,
		Chart:              s.vcluster.Chart,
		ClassSelectorLabel: naming.ClassTenantLabel(t.Name),
		GPUTolerations:     s.tolerations,
		ControlPlane:       t.VCluster,
		KubeconfigServer:   s.vcluster.ServerFor(t.Name),
		Platform:           s.platform,
		PlatformAccessKey:  secretInput(s.accessKeys[t.Name]),
		Await:              s.vcluster.Awaits(),
		PodSecurity:        tenant.PodSecurity,
		// The quota and limit range must be in place before the vCluster's pods are admitted.
	}, append(opts, pulumi.DependsOn(tenant.Admission))...)
	if err != nil {
		return nil, fmt.Errorf("creating the vCluster of tenant %q: %w", t.Name, err)
	}
	out["kubeconfigSecret"] = pulumi.Sprintf("%s/%s", vc.KubeconfigSecretNamespace, vc.KubeconfigSecretName)
	if s.vcluster.Awaits() {
		out["kubeconfig"] = vc.Kubeconfig
	}
	return out, nil
}

// secretInput is a secret as a Pulumi secret, or nil when it is not set.
func secretInput(s Secret) pulumi.StringInput {
	if s == "" {
		return nil
	}
	return pulumi.ToSecret(pulumi.String(string(s))).(pulumi.StringOutput)
}

// newCluster creates the cluster of the args' flavour; kubeconfig is an existing cluster's, already read.
func (c *PlatformArgs) newCluster(ctx *pulumi.Context, kubeconfig string, opts []pulumi.ResourceOption) (*cluster.Cluster, error) {
	switch c.Cloud {
	case cluster.GKE:
		cl, err := gke.NewCluster(ctx, "gke", &c.GKE, opts...)
		if err != nil {
			return nil, fmt.Errorf("creating the GKE cluster: %w", err)
		}
		return cl.Contract(), nil
	case cluster.Scaleway:
		cl, err := scaleway.NewCluster(ctx, "kapsule", &c.Scaleway, opts...)
		if err != nil {
			return nil, fmt.Errorf("creating the Kapsule cluster: %w", err)
		}
		return cl.Contract(), nil
	default:
		args := c.Existing
		args.Kubeconfig = pulumi.ToSecret(pulumi.String(kubeconfig)).(pulumi.StringOutput)
		cl, err := cluster.NewExisting(ctx, "existing", &args, opts...)
		if err != nil {
			return nil, fmt.Errorf("wrapping the existing cluster: %w", err)
		}
		return cl.Contract(), nil
	}
}

// constructed holds, per running program, the name of its Platform: the children's names are the platform's own
// (fixed, so that a stack keeps its URNs), so a second Platform in one program would collide with the first.
var constructed sync.Map

// resolvePaths expands and resolves the paths of the args (local charts, the existing cluster's kubeconfig file)
// against baseDir, reporting a path that expands to nothing (a variable not set) and a relative one where there is no
// directory to take it from (a component provider's construct has none).
func (c *PlatformArgs) resolvePaths(baseDir string) field.ErrorList {
	var errs field.ErrorList
	path := c.Keys.Path
	paths := []struct {
		p    *field.Path
		path *string
	}{
		{path(keyDRADriver).Child("chart", "path"), &c.DRADriver.Chart.Path},
		{path(keyPlatform).Child("chart", "path"), &c.Platform.Chart.Path},
		{path(keyVCluster).Child("chart", "path"), &c.VCluster.Chart.Path},
		{path(keyMonitoring).Child("kubeStateMetrics", "chart", "path"), &c.Monitoring.KubeStateMetrics.Chart.Path},
		{path(keyExisting).Child("kubeconfigPath"), &c.Existing.KubeconfigPath},
	}
	for _, f := range paths {
		given := *f.path
		if given == "" {
			continue
		}
		expanded := expand(given)
		switch {
		case expanded == "":
			errs = append(errs, field.Invalid(f.p, given, "expands to nothing: set the environment variables it names"))
		case !filepath.IsAbs(expanded) && baseDir == "":
			errs = append(errs, field.Invalid(f.p, given, "must be absolute: there is no project directory to take a "+
				"relative path from (a program run through the component provider)"))
		default:
			*f.path = resolve(baseDir, given)
		}
	}
	return errs
}

// expand expands environment variables, $VAR, ${VAR} and ${VAR:-default} as a shell does.
func expand(p string) string {
	return os.Expand(p, func(v string) string {
		name, fallback, hasFallback := strings.Cut(v, ":-")
		if value := os.Getenv(name); value != "" || !hasFallback {
			return value
		}
		return fallback
	})
}

// resolve expands environment variables in a path, $VAR, ${VAR} and ${VAR:-default} as a shell does, and makes it
// absolute against baseDir; "" stays "".
func resolve(baseDir, p string) string {
	p = expand(p)
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(baseDir, p)
}

// existingKubeconfig is an existing cluster's kubeconfig: the secret, else the file (its path resolved).
func (c *PlatformArgs) existingKubeconfig() (string, error) {
	if c.Secrets.Kubeconfig != "" {
		return string(c.Secrets.Kubeconfig), nil
	}
	raw, err := os.ReadFile(c.Existing.KubeconfigPath)
	if err != nil {
		return "", fmt.Errorf("%s: reading the kubeconfig: %w", c.Keys.Path(keyExisting).Child("kubeconfigPath"), err)
	}
	return string(raw), nil
}
