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

// CatalogName names the GPU catalog in the program; its DeviceClasses are <CatalogName>-<class>
// (tenancy.NewCatalog).
const CatalogName = "gpu-catalog"

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

// NewPlatform validates the complete args, defaults applied, with every component's rules and against the clouds this
// program includes (validateIncluded), then checks that an existing cluster holds no object of another owner, and
// registers nothing unless both pass. Then it builds, in order, the cluster, the DRA driver, vCluster Platform, the
// GPU catalog, monitoring and, in parallel, the tenants: each step takes what the previous one returned, and tenants
// depend on the catalog and the platform, never on each other. In an environment split into tenant groups, the
// platform part builds all but the tenants, and a tenants part only its group's tenants, on the cluster the platform
// part manages (parts.go).
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
	errs = append(errs, a.Validate()...)
	if errs = append(errs, validateIncluded(&a, a.Keys.Path)...); len(errs) > 0 {
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
	warn := func(msg string) { _ = ctx.Log.Warn(msg, nil) }
	for _, w := range a.exposures() {
		warn(w)
	}
	st := stackInfo{project: ctx.Project(), stack: ctx.Stack(), dryRun: ctx.DryRun()}
	// An existing cluster is read before anything is registered; a group stack of a cloud cluster learns the
	// kubeconfig from the platform stack's outputs, through a stack reference it registers first.
	var kubeconfig, identity string
	if a.Cloud == cluster.Existing {
		if kubeconfig, err = a.existingKubeconfig(); err != nil {
			return nil, err
		}
		if identity, err = a.checkLive(ctx.Context(), st, kubeconfig, owner, platformStack, warn); err != nil {
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
	var referenced pulumi.StringInput
	if a.Cloud != cluster.Existing && platformStack != "" {
		if referenced, kubeconfig, err = a.platformKubeconfig(ctx, platformStack, top); err != nil {
			return nil, err
		}
		if kubeconfig != "" {
			if identity, err = a.checkLive(ctx.Context(), st, kubeconfig, owner, platformStack, warn); err != nil {
				return nil, err
			}
		}
	}
	buildsPlatform, tenants := a.builds()
	var cl *cluster.Cluster
	if buildsPlatform {
		cl, err = a.newCluster(ctx, kubeconfig, identity, top)
	} else {
		cl, err = a.referencedCluster(ctx, kubeconfig, referenced, identity, top)
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
	tenantOpts := append(slices.Clone(inCluster), pulumi.DependsOn(afterPlatform))
	if buildsPlatform && a.Cloud != cluster.Existing && len(tenants) > 0 {
		tenantOpts = append(tenantOpts, pulumi.DependsOnInputs(a.probeBuiltCluster(ctx, cl.Kubeconfig, tenants, warn)))
	}
	outputs := pulumi.Map{}
	named := a.namedClasses()
	for _, t := range tenants {
		t.GPUAccess, t.ExtendedResourceNames = a.GPUAccessOf(t), extendedResourceNames(t, named)
		out, err := shared.newTenant(ctx, t, a.offeredClasses(t), tenantOpts...)
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
		driverArgs.Controller = cl.PlatformPlacement()
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
		platformArgs.Placement = cl.PlatformPlacement()
		platform, err := vcluster.NewPlatform(ctx, "platform", &platformArgs, inCluster...)
		if err != nil {
			return nil, nil, fmt.Errorf("creating vCluster Platform: %w", err)
		}
		afterPlatform = append(afterPlatform, platform)
	}
	// The guards and classes are protected while the config has tenants (and with them every object of the catalog:
	// children inherit protect), so that a destroy of this stack through the pulumi CLI fails instead of leaving
	// tenants without their guards or classes; gpu-tenancy destroy takes the tenants down first, and lifts the
	// protection of a class the config drops.
	catalog, err := tenancy.NewCatalog(ctx, CatalogName, &tenancy.CatalogArgs{
		Classes: c.GPUClasses, Grants: c.Grants(), Admission: c.admissionArgs(cl.ClaimStatusWriters, cl.GPUTaints()),
		ExtendedResourceClasses: c.ExtendedResourceClasses(),
	}, append(inCluster, pulumi.DependsOn(afterDriver), pulumi.Protect(len(c.Tenants) > 0))...)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the GPU catalog: %w", err)
	}
	if c.Monitoring.EnabledFor(cl.Flavour) {
		monitoringArgs := c.monitoringArgs()
		monitoringArgs.Placement = cl.PlatformPlacement()
		if _, err := monitoring.NewMonitoring(ctx, "monitoring", &monitoringArgs, inCluster...); err != nil {
			return nil, nil, fmt.Errorf("creating monitoring: %w", err)
		}
	}
	return catalog, afterPlatform, nil
}

// tenantShared are the settings every tenant shares but the catalog.
func (c *PlatformArgs) tenantShared(cl *cluster.Cluster) tenantShared {
	shared := tenantShared{
		lostKubeconfigs: c.lostKubeconfigs,
		vcluster:        c.VCluster,
		tolerations:     cl.GPUTaints(),
		dedicated:       cluster.Dedicated(cl.GPUPools),
		network: tenancy.NetworkArgs{
			// Cilium gives the API server an identity that ipBlock rules do not match (tenancy.NetworkArgs).
			CiliumAPIServerAccess: cl.Flavour == cluster.Scaleway && c.Scaleway.CNI == "cilium",
			APIClientCIDRs:        c.VCluster.APIClientCIDRs,
			APIClientPort:         vcluster.APIPort,
			PodCIDRs:              cl.PodCIDRs,
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

// platformKubeconfig reads the kubeconfig the platform stack of a group stack exports for the cloud cluster it
// manages, through a stack reference. The value is read at once, so the cluster is checked before anything of this
// stack is registered on it; while the platform stack has not exported one yet (a preview of a new environment), the
// value is "" and the provider takes the reference's output.
func (c *PlatformArgs) platformKubeconfig(ctx *pulumi.Context, platformStack string, opts []pulumi.ResourceOption) (pulumi.StringInput, string, error) {
	ref, err := pulumi.NewStackReference(ctx, "platform-stack", &pulumi.StackReferenceArgs{
		Name: pulumi.String(fmt.Sprintf("%s/%s/%s", ctx.Organization(), ctx.Project(), platformStack)),
	}, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("reading the outputs of the platform stack %s: %w", platformStack, err)
	}
	details, err := ref.GetOutputDetails("kubeconfig")
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig of the platform stack %s: %w", platformStack, err)
	}
	value := details.Value
	if value == nil {
		value = details.SecretValue
	}
	if kubeconfig, ok := value.(string); ok && kubeconfig != "" {
		return pulumi.ToSecret(pulumi.String(kubeconfig)).(pulumi.StringOutput), kubeconfig, nil
	}
	if !ctx.DryRun() {
		return nil, "", fmt.Errorf("the platform stack %s exports no kubeconfig: bring it up first (gpu-tenancy up "+
			"<environment> does, before the groups)", platformStack)
	}
	_ = ctx.Log.Warn(fmt.Sprintf("the platform stack %s exports no kubeconfig yet: this preview does not check the cluster", platformStack), nil)
	return ref.GetStringOutput(pulumi.String("kubeconfig")), "", nil
}

// checkLive reads the cluster before this stack registers anything on it and refuses what would go wrong there: in
// an environment of tenant groups it learns which stack holds each tenant (placing the tenants the config does not
// place), then refuses objects another stack owns (checkOwnership), tenants whose Service quotas do not fit the
// cluster's Service range (checkServiceRoom), a group's tenants the platform's guards would not cover (checkGuards),
// and a cluster that rewrites tenant pods into ones the guards refuse (hostRewrites). It returns
// the cluster's identity. A kubeconfig that reaches no cluster (as in the offline plans) is a warning: the program
// cannot create anything there either.
func (c *PlatformArgs) checkLive(goctx context.Context, st stackInfo, kubeconfig, owner, platformStack string, warn func(string)) (string, error) {
	l, err := connect(kubeconfig)
	if err != nil {
		warn(fmt.Sprintf("not checking the cluster: %v", err))
		return "", nil
	}
	identity, err := l.identity(goctx)
	if err != nil {
		if isUnreachable(err) {
			warn(fmt.Sprintf("not checking the cluster: %v", err))
			return "", nil
		}
		return "", err
	}
	for _, w := range l.nodeExposures(goctx, c.platformPool(), c.podRange()) {
		warn(w)
	}
	if c.TenantGroups > 0 {
		env := st.stack
		if platformStack != "" {
			env = platformStack
		}
		if err := l.checkNoExclusiveRun(goctx, env); err != nil {
			return "", err
		}
		owners, err := TenantOwners(goctx, l.meta)
		if err != nil {
			return "", err
		}
		c.live = LiveGroups(owners, st.project, env)
		if errs := validateParts(c, c.Keys.Path); len(errs) > 0 {
			return "", &ArgsError{Keys: c.Keys, Errs: errs}
		}
	}
	if err := checkOwnership(goctx, l.meta, owner, plannedObjects(c), c.Ownership.Adopt, c.Keys.Path(keyOwnership).Child("adopt")); err != nil {
		return "", err
	}
	buildsPlatform, tenants := c.builds()
	if buildsPlatform {
		if err := c.checkServesExtendedResources(goctx, l, warn); err != nil {
			return "", err
		}
		// Every tenant of the environment at once: the platform stack runs first, and reads the whole stack file.
		if err := l.checkServiceRoom(goctx, c, warn); err != nil {
			return "", err
		}
	}
	if _, isGroup := c.part.Group(); isGroup && len(tenants) > 0 {
		platformOwner := naming.StackOwner(st.project, platformStack)
		if err := l.checkGuards(goctx, c, platformStack, platformOwner, tenants, st.dryRun, warn); err != nil {
			return "", err
		}
	}
	if err := l.checkClaimsLeftUnsynced(goctx, c, tenants); err != nil {
		return "", err
	}
	if len(tenants) > 0 {
		if err := l.hostRewrites(goctx, c, l.probeNamespace(goctx, tenants), warn); err != nil {
			return "", err
		}
	}
	if len(tenants) > 0 && c.VCluster.IsEnabled() && c.VCluster.Awaits() {
		if c.lostKubeconfigs, err = l.lostKubeconfigs(goctx, tenants, warn); err != nil {
			return "", err
		}
	}
	return identity, nil
}

// checkServesExtendedResources refuses, when a tenant asks for GPUs by name, a cluster whose API server drops a
// DeviceClass's extended-resource name (servesExtendedResources), naming the key; a cluster that cannot be asked is a
// warning.
func (c *PlatformArgs) checkServesExtendedResources(goctx context.Context, l *liveCluster, warn func(string)) error {
	i := c.firstNamingTenant()
	if i < 0 {
		return nil
	}
	served, err := l.servesExtendedResources(goctx)
	switch {
	case err != nil:
		warn(fmt.Sprintf("could not check that the cluster keeps the extended-resource names of DeviceClasses: %v", err))
	case !served:
		return &ArgsError{Keys: c.Keys, Errs: field.ErrorList{field.Invalid(c.gpuAccessKey(i), string(c.GPUAccessOf(c.Tenants[i])), fmt.Sprintf(
			"tenant %s asks for GPUs as extended resources, but the cluster's API server dropped a DeviceClass's "+
				"spec.extendedResourceName in a server-side dry run: it runs Kubernetes older than 1.%d, or with the "+
				"DRAExtendedResource feature gate off; upgrade it, or set %s to %s", c.Tenants[i].Name, cluster.ExtendedResourcesMinor,
			c.Keys.Path(keyTenants).Index(i).Child("gpuAccess"), vcluster.ClaimSync))}}
	}
	return nil
}

// stackInfo is what the checks of the cluster need to know of the running stack.
type stackInfo struct {
	project, stack string
	dryRun         bool
}

// referencedCluster is the cluster of a tenants part: an existing cluster's own kubeconfig, or the one the platform
// stack exports for the cloud cluster it manages (referenced, the stack reference's value or output), already checked
// by checkLive; identity is the cluster's, so a new address or CA in the kubeconfig never replaces this stack's
// objects.
func (c *PlatformArgs) referencedCluster(ctx *pulumi.Context, kubeconfig string, referenced pulumi.StringInput, identity string,
	opts []pulumi.ResourceOption) (*cluster.Cluster, error) {
	input := referenced
	if input == nil {
		input = pulumi.String(kubeconfig)
	}
	cl, err := cluster.NewReferenced(ctx, string(c.Cloud), &cluster.ReferencedArgs{
		Flavour: c.Cloud, Kubeconfig: input, ClusterIdentifier: identity, GPUPools: c.GPUPools(), DriverRoot: c.driverRoot(),
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

// platformPool is whether the cluster has a pool of the platform's own, as its flavour's contract says.
func (c *PlatformArgs) platformPool() bool {
	switch c.Cloud {
	case cluster.GKE:
		return c.GKE.PlatformPool()
	case cluster.Scaleway:
		return c.Scaleway.PlatformPool()
	}
	return c.Existing.PlatformPool
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
	named := c.namedClasses()
	var names []string
	for _, class := range c.GPUClasses {
		if name, ok := named[class.Name]; ok {
			names = append(names, name)
		}
	}
	return monitoring.MonitoringArgs{Spec: c.Monitoring, Flavour: c.Cloud, Project: c.GKE.Project,
		DriverNamespace: dra.DefaultNamespace, Prices: c.Prices, ExtendedResourceNames: names,
		ServiceAddresses: c.serviceAddresses()}
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
	// dedicated are the tenants with pools of their own.
	dedicated map[string]bool
	// lostKubeconfigs are the tenants whose running vCluster's kubeconfig Secret is gone (liveCluster.lostKubeconfigs).
	lostKubeconfigs map[string]bool
}

// newTenant builds a tenant's host-side guard rails and, when tenants get one, its vCluster, which holds the classes
// the tenant may ask for by name (offered). Both are protected, and
// with them every object under them (the engine gives children their parent's protect: pulumi pkg v3.274.1
// resource/deploy/source_eval.go inheritFromParent): a program that stops building a tenant still in config (a wrong
// placement, a bug) fails on the first delete instead of deleting the tenant's namespace, vCluster and data. Retiring
// a tenant (retiredTenants) is the one way to delete it, and gpu-tenancy lifts the protection of exactly that
// tenant first (docs/operating.md, "Several environments, drift and recovery").
func (s *tenantShared) newTenant(ctx *pulumi.Context, t TenantArgs, offered []vcluster.OfferedClass, opts ...pulumi.ResourceOption) (pulumi.Map, error) {
	opts = append(opts, pulumi.Protect(true))
	args := t.TenantArgs
	args.Catalog, args.Network = s.catalog, s.network
	platform, accessKey := s.platform, secretInput(s.accessKeys[t.Name])
	if !t.GPUAccess.SyncsClaims() {
		// The open-source syncer connects to no platform: no key, and nothing of the platform's reaches the tenant.
		platform, accessKey = nil, nil
		args.Network.IngressFromNamespaces = nil
	}
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
		Dedicated:          s.dedicated[t.Name],
		ControlPlane:       t.VCluster,
		KubeconfigServer:   s.vcluster.ServerFor(t.Name),
		Images:             s.vcluster.Images,
		GPUAccess:          t.GPUAccess,
		OfferedClasses:     offered,
		Platform:           platform,
		PlatformAccessKey:  accessKey,
		Await:              s.vcluster.Awaits(),
		KubeconfigLost:     s.lostKubeconfigs[t.Name],
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

// cloudClusters are each cloud flavour's cluster: its resource name, which every URN under it holds, what errors call
// it, and its args, of the type the flavour's cluster.Builder takes.
var cloudClusters = map[cluster.Flavour]struct {
	name, what string
	args       func(*PlatformArgs) any
	ranges     cluster.ServiceRanges
}{
	cluster.GKE: {"gke", "GKE", func(c *PlatformArgs) any {
		args := c.GKE
		args.ServiceRange, _ = c.clusterServiceRange(gke.ServiceRanges)
		return &args
	}, gke.ServiceRanges},
	cluster.Scaleway: {"kapsule", "Kapsule", func(c *PlatformArgs) any {
		args := c.Scaleway
		args.ServiceRange, _ = c.clusterServiceRange(scaleway.ServiceRanges)
		return &args
	}, scaleway.ServiceRanges},
}

// exposures are what the config leaves open that a guard cannot close (docs/threat-model.md, "Shared nodes"), and a
// Kubernetes version the cloud's support table cannot vouch for, said on every preview and up.
func (c *PlatformArgs) exposures() []string {
	var said []string
	var versions cluster.SupportTable
	switch c.Cloud {
	case cluster.GKE:
		said, versions = c.GKE.VersionCheck(c.Keys.Path(keyGKE), c.today()).Warnings, gke.SupportedVersions
	case cluster.Scaleway:
		said, versions = c.Scaleway.VersionCheck(c.Keys.Path(keyScaleway), c.today()).Warnings, scaleway.SupportedVersions
	}
	if i := c.firstNamingTenant(); i >= 0 {
		if key, v := c.kubernetesVersion(c.Keys.Path); key != nil && v != "" && versions.ExtendedResourcesUnverified(v) {
			said = append(said, fmt.Sprintf("tenant %s asks for GPUs by extended-resource name (%s), and no page of %s "+
				"that says its %s clusters keep a DeviceClass's extended-resource name could be read for this release's "+
				"table: Kubernetes turns the feature on from 1.%d, and the up asks the built cluster by a server-side dry "+
				"run before any tenant is created, refusing it if the name is dropped", c.Tenants[i].Name,
				c.gpuAccessKey(i), versions.Cloud, v, cluster.ExtendedResourcesMinor))
		}
	}
	if len(c.Tenants) > 0 && !c.platformPool() {
		key := map[cluster.Flavour]string{cluster.GKE: "gke.tenantPool", cluster.Scaleway: "scaleway.tenantPool",
			cluster.Existing: "existing.platformPool"}[c.Cloud]
		said = append(said, fmt.Sprintf("%s is unset: tenants' pods that need no GPU share the system pool's nodes with the "+
			"platform's controllers (vCluster Platform, the DRA driver's controller, kube-state-metrics), so a pod that "+
			"breaks out of its container reaches them and their credentials; set it to give the platform a pool of its own (docs/threat-model.md, \"Cloud identity and node services\")",
			c.Keys.Path(key)))
	}
	if cloud, ok := cloudClusters[c.Cloud]; ok {
		for _, w := range []string{c.sizedRangeSaid(cloud.ranges), c.overcommitSaid(c.cloudServiceRange(cloud.ranges).String(), c.serviceAddresses())} {
			if w != "" {
				said = append(said, w)
			}
		}
	}
	if c.Cloud == cluster.Scaleway && c.Scaleway.WithDefaults().CNI == "calico" {
		var open []string
		for _, t := range c.Tenants {
			if len(t.BlockedEgressCIDRs) == 0 {
				open = append(open, t.Name)
			}
		}
		if len(open) > 0 {
			said = append(said, fmt.Sprintf("%s is calico, whose ipBlock 0.0.0.0/0 matches the nodes' and the pods' own addresses, "+
				"so the egress of tenants %s reach every node's kubelet ports, the read-only port (10255, every tenant's pods, "+
				"unauthenticated) included wherever Kapsule serves it, and the pods of every namespace without an ingress "+
				"policy (vCluster Platform's among them): list the private network's range and the cluster's pod range in their "+
				"blockedEgressCIDRs, or use cilium, whose ipBlock matches no node or pod (docs/threat-model.md, \"Cloud identity and node services\")",
				c.Keys.Path("scaleway").Child("cni"), strings.Join(open, ", ")))
		}
	}
	return said
}

// podRange is the pod ranges the stack gives for an existing cluster, which the nodes are checked against; a cloud
// cluster's are the program's own (cluster.Cluster.PodCIDRs).
func (c *PlatformArgs) podRange() podRange {
	if c.Cloud != cluster.Existing {
		return podRange{}
	}
	return podRange{key: c.Keys.Path(keyExisting).Child("podCIDRs").String(), cidrs: c.Existing.PodCIDRs}
}

// newCluster creates the cluster of the args' flavour: a cloud cluster with the builder its package registered (there
// is one: validateIncluded), or the existing cluster; kubeconfig is an existing cluster's, already read, and identity
// its identity (empty when it could not be read).
func (c *PlatformArgs) newCluster(ctx *pulumi.Context, kubeconfig, identity string, opts []pulumi.ResourceOption) (*cluster.Cluster, error) {
	if cloud, ok := cloudClusters[c.Cloud]; ok {
		build, _ := builderOf(c.Cloud)
		cl, err := build(ctx, cloud.name, cloud.args(c), opts...)
		if err != nil {
			return nil, fmt.Errorf("creating the %s cluster: %w", cloud.what, err)
		}
		return cl, nil
	}
	args := c.Existing
	args.Kubeconfig = pulumi.ToSecret(pulumi.String(kubeconfig)).(pulumi.StringOutput)
	args.ClusterIdentifier = identity
	cl, err := cluster.NewExisting(ctx, "existing", &args, opts...)
	if err != nil {
		return nil, fmt.Errorf("wrapping the existing cluster: %w", err)
	}
	return cl.Contract(), nil
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
