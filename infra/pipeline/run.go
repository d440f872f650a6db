package pipeline

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
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
		for _, chart := range []*helmchart.Chart{&cfg.DRADriver.Chart, &cfg.Platform.Chart, &cfg.VCluster.Chart} {
			chart.Path = resolve(baseDir, chart.Path)
		}
		return build(ctx, cfg, baseDir)
	}
}

// build wires cluster -> DRA driver -> platform -> catalog -> tenants. Each step takes what the previous returned;
// tenants depend on the catalog and platform, never on each other, so they provision in parallel.
func build(ctx *pulumi.Context, cfg *Config, baseDir string) error {
	cl, err := newCluster(ctx, cfg, baseDir)
	if err != nil {
		return err
	}
	inCluster := cl.ResourceOptions()

	// The catalog's classes select devices the driver publishes; with the driver in the stack, classes follow it.
	var afterDriver []pulumi.Resource
	if cfg.DRAEnabled() {
		driver, err := dra.NewDriver(ctx, "dra", &dra.DriverArgs{
			Flavour:        cl.Flavour,
			Chart:          cfg.DRADriver.Chart,
			GPUPools:       cl.GPUPools,
			ComputeDomains: cfg.DRADriver.ComputeDomains,
			MaxGPUNodes:    maxGPUNodes(cfg),
			DriverRoot:     cfg.Existing.DriverRoot,
		}, inCluster...)
		if err != nil {
			return fmt.Errorf("creating the NVIDIA DRA driver: %w", err)
		}
		afterDriver = append(afterDriver, driver)
	}

	var platformConn *vcluster.PlatformConnection
	var afterPlatform []pulumi.Resource
	network := tenancy.NetworkArgs{
		// Cilium gives the API server an identity that ipBlock rules do not match (tenancy.NetworkArgs).
		CiliumAPIServerAccess: cl.Flavour == cluster.Scaleway && cfg.Scaleway.CNI == "cilium",
	}
	if cfg.PlatformEnabled() {
		platform, err := vcluster.NewPlatform(ctx, "platform", &vcluster.PlatformArgs{
			Chart:         cfg.Platform.Chart,
			Host:          cfg.Platform.Host,
			AdminPassword: pulumi.ToSecret(pulumi.String(string(cfg.Secrets.PlatformAdminPassword))).(pulumi.StringOutput),
			LicenseToken:  optionalSecret(cfg.Secrets.PlatformLicenseToken),
			AccessKey:     optionalSecret(cfg.Secrets.PlatformAccessKey),
		}, inCluster...)
		if err != nil {
			return fmt.Errorf("creating vCluster Platform: %w", err)
		}
		platformConn = platform.Connection
		afterPlatform = append(afterPlatform, platform)
		// The platform proxies to each tenant's vCluster API.
		network.IngressFromNamespaces = []string{vcluster.DefaultPlatformNamespace}
	}

	catalog, err := tenancy.NewCatalog(ctx, "gpu-catalog", &tenancy.CatalogArgs{Classes: gpuClasses(cfg)},
		append(inCluster, pulumi.DependsOn(afterDriver))...)
	if err != nil {
		return fmt.Errorf("creating the GPU catalog: %w", err)
	}

	tenants := pulumi.Map{}
	for _, t := range cfg.Tenants {
		out, err := newTenant(ctx, cfg, cl, catalog, t, network, platformConn, append(inCluster, pulumi.DependsOn(afterPlatform))...)
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

func newTenant(ctx *pulumi.Context, cfg *Config, cl *cluster.Cluster, catalog *tenancy.Catalog, t TenantConfig,
	network tenancy.NetworkArgs, platform *vcluster.PlatformConnection, opts ...pulumi.ResourceOption) (pulumi.Map, error) {
	args := tenantArgs(t)
	args.Catalog = catalog
	args.Network.CiliumAPIServerAccess = network.CiliumAPIServerAccess
	args.Network.IngressFromNamespaces = network.IngressFromNamespaces
	tenant, err := tenancy.NewTenant(ctx, t.Name, args, opts...)
	if err != nil {
		return nil, fmt.Errorf("creating tenant %q: %w", t.Name, err)
	}
	out := pulumi.Map{"namespace": tenant.Namespace, "classes": tenant.Classes}
	if !cfg.VClusterEnabled() {
		return out, nil
	}
	var tolerations []cluster.Taint
	seen := map[cluster.Taint]bool{}
	for _, p := range cl.GPUPools {
		if p.Taint.Key != "" && !seen[p.Taint] {
			seen[p.Taint] = true
			tolerations = append(tolerations, p.Taint)
		}
	}
	vc, err := vcluster.NewVirtualCluster(ctx, t.Name, &vcluster.VirtualClusterArgs{
		Tenant:             t.Name,
		Namespace:          tenant.Namespace,
		Chart:              cfg.VCluster.Chart,
		ClassSelectorLabel: tenancy.ClassTenantLabel(t.Name),
		GPUTolerations:     tolerations,
		ControlPlane: vcluster.ResourceRequirements{
			Requests: vcluster.ResourceList{CPU: t.VCluster.CPU, Memory: t.VCluster.Memory},
			Limits:   vcluster.ResourceList{Memory: t.VCluster.Memory},
		},
		Persistence:      vcluster.Persistence{Size: t.VCluster.StorageSize, StorageClass: t.VCluster.StorageClass},
		KubeconfigServer: strings.ReplaceAll(cfg.VCluster.KubeconfigServer, "{tenant}", t.Name),
		Platform:         platform,
		Await:            cfg.VClusterAwait(),
		// The quota and limit range must be in place before the vCluster's pods are admitted.
	}, append(opts, pulumi.DependsOn(tenant.Admission))...)
	if err != nil {
		return nil, fmt.Errorf("creating the vCluster of tenant %q: %w", t.Name, err)
	}
	out["kubeconfigSecret"] = pulumi.Sprintf("%s/%s", vc.KubeconfigSecretNamespace, vc.KubeconfigSecretName)
	if cfg.VClusterAwait() {
		out["kubeconfig"] = vc.Kubeconfig
	}
	return out, nil
}

// tenantArgs are the tenant component's arguments from config; the pipeline adds the catalog and cluster-wide
// network settings.
func tenantArgs(t TenantConfig) *tenancy.TenantArgs {
	return &tenancy.TenantArgs{
		Name:        t.Name,
		Classes:     t.Classes,
		DeviceQuota: t.GPUQuota,
		CPU:         t.CPUQuota,
		Memory:      t.MemoryQuota,
		Network:     tenancy.NetworkArgs{BlockedEgressCIDRs: t.BlockedEgressCIDRs},
	}
}

func optionalSecret(s Secret) pulumi.StringInput {
	if s == "" {
		return nil
	}
	return pulumi.ToSecret(pulumi.String(string(s))).(pulumi.StringOutput)
}

// maxGPUNodes is how many GPU nodes the pools may scale to.
func maxGPUNodes(cfg *Config) int {
	n := 0
	for _, p := range cfg.GPUPools {
		n += *p.MaxNodes
	}
	return n
}

func gpuClasses(cfg *Config) []tenancy.GPUClass {
	var out []tenancy.GPUClass
	for _, c := range cfg.GPUClasses {
		class := tenancy.GPUClass{
			Name: c.Name, Device: tenancy.DeviceKind(c.Device), MIGProfile: c.MIGProfile, Product: c.Product, ExtraCEL: c.ExtraCEL,
		}
		for _, t := range cfg.Tenants {
			if slices.Contains(t.Classes, c.Name) {
				class.Tenants = append(class.Tenants, t.Name)
			}
		}
		out = append(out, class)
	}
	return out
}

func newCluster(ctx *pulumi.Context, cfg *Config, baseDir string) (*cluster.Cluster, error) {
	switch cfg.Cloud {
	case "gke":
		g := cfg.GKE
		args := &gke.ClusterArgs{
			Project: g.Project, Zone: g.Zone, Region: GKERegion(g.Zone), KubernetesVersion: g.KubernetesVersion,
			ReleaseChannel: g.ReleaseChannel, DeletionProtection: *g.DeletionProtection,
			SystemPool: gke.SystemPoolArgs{MachineType: g.SystemPool.MachineType, MinNodes: *g.SystemPool.MinNodes, MaxNodes: *g.SystemPool.MaxNodes},
		}
		for _, p := range cfg.GPUPools {
			acc := gkeAccelerators[p.Accelerator]
			args.GPUPools = append(args.GPUPools, gke.GPUPoolArgs{
				Name: p.Name, MachineType: p.MachineType, Accelerator: p.Accelerator, GPUCount: gkeGPUCount(p.MachineType),
				Partition: p.Partition, MinNodes: *p.MinNodes, MaxNodes: *p.MaxNodes, Model: acc.model,
			})
		}
		c, err := gke.NewCluster(ctx, "gke", args)
		if err != nil {
			return nil, fmt.Errorf("creating the GKE cluster: %w", err)
		}
		return c.Contract(), nil
	case "scaleway":
		s := cfg.Scaleway
		args := &scaleway.ClusterArgs{
			Zone: s.Zone, Region: ScalewayRegion(s.Zone), KubernetesVersion: s.KubernetesVersion, CNI: s.CNI,
			DeleteAdditionalResources: s.DeleteAdditionalResources,
			AutoUpgrade: scaleway.AutoUpgradeArgs{Enabled: *s.AutoUpgrade.Enabled, MaintenanceWindowDay: s.AutoUpgrade.MaintenanceWindowDay,
				MaintenanceWindowStartHour: *s.AutoUpgrade.MaintenanceWindowStartHour},
			Autoscaler: scaleway.AutoscalerArgs{ScaleDownDelayAfterAdd: s.Autoscaler.ScaleDownDelayAfterAdd,
				ScaleDownUnneededTime: s.Autoscaler.ScaleDownUnneededTime, Expander: s.Autoscaler.Expander},
			SystemPool: scaleway.SystemPoolArgs{NodeType: s.SystemPool.NodeType, MinNodes: *s.SystemPool.MinNodes, MaxNodes: *s.SystemPool.MaxNodes},
		}
		for _, p := range cfg.GPUPools {
			nt := scalewayNodeTypes[p.NodeType]
			args.GPUPools = append(args.GPUPools, scaleway.GPUPoolArgs{
				Name: p.Name, NodeType: p.NodeType, GPUsPerNode: nt.gpus, Partition: p.Partition,
				MinNodes: *p.MinNodes, MaxNodes: *p.MaxNodes, Model: nt.model,
			})
		}
		c, err := scaleway.NewCluster(ctx, "kapsule", args)
		if err != nil {
			return nil, fmt.Errorf("creating the Kapsule cluster: %w", err)
		}
		return c.Contract(), nil
	default:
		kubeconfig, err := existingKubeconfig(cfg, baseDir)
		if err != nil {
			return nil, err
		}
		c, err := cluster.NewExisting(ctx, "existing", &cluster.ExistingArgs{
			Kubeconfig: pulumi.ToSecret(pulumi.String(kubeconfig)).(pulumi.StringOutput),
			GPUPools:   existingPools(cfg),
		})
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
