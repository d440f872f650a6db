package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Run is the Pulumi program: load and validate the stack config, then build the platform. Relative paths in the
// config are taken from the project directory.
func Run(ctx *pulumi.Context) error { return Program("")(ctx) }

// Program is the Pulumi program with relative config paths taken from baseDir (the project directory when empty),
// for drivers whose workspace is not the project directory.
func Program(baseDir string) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		cfg, err := Load(contextSource{ctx})
		if err != nil {
			return err
		}
		if baseDir == "" {
			baseDir = ctx.RootDirectory()
		}
		for _, chart := range []*helmchart.Chart{&cfg.DRADriver.Chart, &cfg.Platform.Chart, &cfg.VCluster.Chart,
			&cfg.Monitoring.KubeStateMetrics.Chart} {
			chart.Path = resolve(baseDir, chart.Path)
		}
		return build(ctx, cfg, baseDir)
	}
}

// build wires cluster -> DRA driver -> platform -> catalog -> tenants. Each step takes what the previous returned;
// tenants depend on the catalog and platform, never on each other, so they provision in parallel.
func build(ctx *pulumi.Context, cfg *Config, baseDir string) error {
	owner, err := owner(ctx.Project(), ctx.Stack())
	if err != nil {
		return err
	}
	cl, err := newCluster(ctx, cfg, baseDir, owner)
	if err != nil {
		return err
	}
	cl.Owner, cl.Timeouts = owner, cfg.Timeouts
	inCluster := cl.ResourceOptions()
	// The catalog's classes select devices the driver publishes; with the driver in the stack, classes follow it.
	var afterDriver []pulumi.Resource
	if cfg.DRAEnabled() {
		args := cfg.DRADriver.DriverArgs
		args.Flavour, args.GPUPools, args.DriverRoot = cl.Flavour, cl.GPUPools, cl.DriverRoot
		driver, err := dra.NewDriver(ctx, "dra", &args, inCluster...)
		if err != nil {
			return fmt.Errorf("creating the NVIDIA DRA driver: %w", err)
		}
		afterDriver = append(afterDriver, driver)
	}
	shared := tenantShared{
		vcluster:    cfg.VCluster,
		tolerations: cl.GPUTaints(),
		network: tenancy.NetworkArgs{
			// Cilium gives the API server an identity that ipBlock rules do not match (tenancy.NetworkArgs).
			CiliumAPIServerAccess: cl.Flavour == cluster.Scaleway && cfg.Scaleway.CNI == "cilium",
		},
	}
	var afterPlatform []pulumi.Resource
	if cfg.PlatformInstalled() {
		args := cfg.Platform.PlatformArgs
		args.AdminPassword = pulumi.ToSecret(pulumi.String(string(cfg.Secrets.PlatformAdminPassword))).(pulumi.StringOutput)
		args.LicenseToken = optionalSecret(cfg.Secrets.PlatformLicenseToken)
		platform, err := vcluster.NewPlatform(ctx, "platform", &args, inCluster...)
		if err != nil {
			return fmt.Errorf("creating vCluster Platform: %w", err)
		}
		shared.platform = platform.Connection
		afterPlatform = append(afterPlatform, platform)
	} else if cfg.PlatformEnabled() {
		shared.platform = &vcluster.PlatformConnection{Host: cfg.Platform.Host, Project: vcluster.DefaultProject}
	}
	if cfg.PlatformEnabled() {
		// The platform proxies to each tenant's vCluster API.
		shared.network.IngressFromNamespaces = []string{vcluster.DefaultPlatformNamespace}
		shared.accessKeys = cfg.Secrets.PlatformAccessKeys
	}
	admission := cfg.Admission
	admission.GPUTaints = taintKeys(cl.GPUTaints())
	admission.ClaimStatusWriters = cl.ClaimStatusWriters
	for _, w := range cfg.Admission.ClaimStatusWriters {
		if !slices.Contains(admission.ClaimStatusWriters, w) {
			admission.ClaimStatusWriters = append(admission.ClaimStatusWriters, w)
		}
	}
	shared.catalog, err = tenancy.NewCatalog(ctx, "gpu-catalog", &tenancy.CatalogArgs{
		Classes: cfg.GPUClasses, Grants: cfg.Grants(), Admission: admission,
	}, append(inCluster, pulumi.DependsOn(afterDriver))...)
	if err != nil {
		return fmt.Errorf("creating the GPU catalog: %w", err)
	}
	if cfg.Monitoring.EnabledFor(cl.Flavour) {
		args := &monitoring.MonitoringArgs{Spec: cfg.Monitoring, Flavour: cl.Flavour, Project: cfg.GKE.Project,
			DriverNamespace: dra.DefaultNamespace, Prices: cfg.Prices}
		if _, err := monitoring.NewMonitoring(ctx, "monitoring", args, inCluster...); err != nil {
			return fmt.Errorf("creating monitoring: %w", err)
		}
	}
	tenants := pulumi.Map{}
	for _, t := range cfg.Tenants {
		out, err := shared.newTenant(ctx, t, append(inCluster, pulumi.DependsOn(afterPlatform))...)
		if err != nil {
			return err
		}
		tenants[t.Name] = out
	}
	ctx.Export("tenants", tenants)
	ctx.Export("kubeconfig", cl.Kubeconfig)
	ctx.Export("flavour", pulumi.String(string(cl.Flavour)))
	return nil
}

// tenantShared is what every tenant shares, computed once by build.
type tenantShared struct {
	catalog     *tenancy.Catalog
	network     tenancy.NetworkArgs
	vcluster    vcluster.Settings
	platform    *vcluster.PlatformConnection
	accessKeys  map[string]Secret
	tolerations []cluster.Taint
}

func taintKeys(taints []cluster.Taint) []string {
	keys := make([]string, len(taints))
	for i, t := range taints {
		keys[i] = t.Key
	}
	return keys
}

// newTenant builds a tenant's host-side guard rails and, when tenants get one, its vCluster.
func (s *tenantShared) newTenant(ctx *pulumi.Context, t TenantConfig, opts ...pulumi.ResourceOption) (pulumi.Map, error) {
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
		PlatformAccessKey:  optionalSecret(s.accessKeys[t.Name]),
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

func optionalSecret(s Secret) pulumi.StringInput {
	if s == "" {
		return nil
	}
	return pulumi.ToSecret(pulumi.String(string(s))).(pulumi.StringOutput)
}

func newCluster(ctx *pulumi.Context, cfg *Config, baseDir, owner string) (*cluster.Cluster, error) {
	switch cfg.Cloud {
	case cluster.GKE:
		c, err := gke.NewCluster(ctx, "gke", &cfg.GKE)
		if err != nil {
			return nil, fmt.Errorf("creating the GKE cluster: %w", err)
		}
		return c.Contract(), nil
	case cluster.Scaleway:
		c, err := scaleway.NewCluster(ctx, "kapsule", &cfg.Scaleway)
		if err != nil {
			return nil, fmt.Errorf("creating the Kapsule cluster: %w", err)
		}
		return c.Contract(), nil
	default:
		kubeconfig, err := existingKubeconfig(cfg, baseDir)
		if err != nil {
			return nil, err
		}
		warn := func(msg string) { _ = ctx.Log.Warn(msg, nil) }
		if err := checkExistingCluster(ctx.Context(), cfg, kubeconfig, owner, warn); err != nil {
			return nil, err
		}
		args := cfg.Existing
		args.Kubeconfig = pulumi.ToSecret(pulumi.String(kubeconfig)).(pulumi.StringOutput)
		c, err := cluster.NewExisting(ctx, "existing", &args)
		if err != nil {
			return nil, fmt.Errorf("wrapping the existing cluster: %w", err)
		}
		return c.Contract(), nil
	}
}

// resolve expands environment variables in a config path and makes it absolute against baseDir; "" stays "".
func resolve(baseDir, p string) string {
	p = os.ExpandEnv(p)
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(baseDir, p)
}

func existingKubeconfig(cfg *Config, baseDir string) (string, error) {
	if cfg.Secrets.Kubeconfig != "" {
		return string(cfg.Secrets.Kubeconfig), nil
	}
	raw, err := os.ReadFile(resolve(baseDir, cfg.Existing.KubeconfigPath))
	if err != nil {
		return "", fmt.Errorf("%s:existing.kubeconfigPath: reading the kubeconfig: %w", Namespace, err)
	}
	return string(raw), nil
}
