// Package kapsule builds the Kapsule cluster package scaleway describes, with the pulumi-scaleway SDK: its private
// network, the cluster (Cilium), a system pool and one pool per GPU pool, plus the kubernetes provider that reaches
// it. Importing it registers the scaleway flavour's builder (cluster.RegisterBuilder), so only the programs that build
// Kapsule clusters link the SDK.
package kapsule

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	k8s "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-scaleway/sdk/go/scaleway/kubernetes"
	"github.com/pulumiverse/pulumi-scaleway/sdk/go/scaleway/network"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
)

func init() { cluster.RegisterBuilder(cluster.Scaleway, cluster.Typed(cluster.Scaleway, NewCluster)) }

// Cluster is a Kapsule cluster with its network, pools and the kubernetes provider that reaches it.
type Cluster struct {
	pulumi.ResourceState

	PrivateNetwork *network.PrivateNetwork
	Kapsule        *kubernetes.Cluster
	SystemPool     *kubernetes.Pool
	// TenantPool runs the tenants' pods that need no GPU; nil without scaleway.tenantPool.
	TenantPool *kubernetes.Pool
	GPUPools   []*kubernetes.Pool
	Provider   *k8s.Provider
	// Kubeconfig carries an admin token; it is a secret.
	Kubeconfig  pulumi.StringOutput
	ClusterName pulumi.StringOutput
	APIServer   pulumi.StringOutput

	pools []cluster.GPUPool
}

// NewCluster creates the network, the cluster, its pools and its kubernetes provider.
func NewCluster(ctx *pulumi.Context, name string, args *scaleway.ClusterArgs, opts ...pulumi.ResourceOption) (*Cluster, error) {
	if args == nil {
		return nil, fmt.Errorf("Kapsule cluster %q: args are required", name)
	}
	if errs := args.Validate(field.NewPath("scaleway"), field.NewPath("gpuPools"), time.Now()); len(errs) > 0 {
		return nil, fmt.Errorf("Kapsule cluster %q: %w", name, errs.ToAggregate())
	}
	comp := &Cluster{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:scaleway:Cluster", name, comp, opts...); err != nil {
		return nil, fmt.Errorf("registering Kapsule cluster %q: %w", name, err)
	}

	var err error
	// Kapsule requires a private network (pulumiverse/pulumi-scaleway sdk/go/scaleway/kubernetes/cluster.go PrivateNetworkId).
	comp.PrivateNetwork, err = network.NewPrivateNetwork(ctx, name, &network.PrivateNetworkArgs{
		Region: pulumi.String(scaleway.Region(args.Zone)),
	}, pulumi.Parent(comp))
	if err != nil {
		return nil, fmt.Errorf("creating private network of Kapsule cluster %q: %w", name, err)
	}

	stack := naming.CostStackValue(ctx.Project(), ctx.Stack())
	// The SDK marks the kubeconfigs output secret itself (AdditionalSecretOutputs in kubernetes.NewCluster).
	comp.Kapsule, err = kubernetes.NewCluster(ctx, name, kapsuleArgs(args, comp.PrivateNetwork, stack), pulumi.Parent(comp),
		pulumi.Protect(args.ServiceRange.Protect))
	if err != nil {
		return nil, fmt.Errorf("creating Kapsule cluster %q: %w", name, err)
	}
	comp.ClusterName = comp.Kapsule.Name
	comp.APIServer = comp.Kapsule.ApiserverUrl

	if comp.SystemPool, err = newCPUPool(ctx, name, naming.CostSystemPool, args, args.SystemPool, args.PlatformPool(), stack, comp); err != nil {
		return nil, fmt.Errorf("creating system pool of Kapsule cluster %q: %w", name, err)
	}
	pools := []pulumi.Resource{comp.SystemPool}
	if args.TenantPool != nil {
		if comp.TenantPool, err = newCPUPool(ctx, name, naming.CostTenantPool, args, *args.TenantPool, false, stack, comp); err != nil {
			return nil, fmt.Errorf("creating tenant pool of Kapsule cluster %q: %w", name, err)
		}
		pools = append(pools, comp.TenantPool)
	}
	for _, p := range args.GPUPools {
		contract, _ := scaleway.PoolContract(p)
		pa := poolArgs(args, comp.Kapsule, p.NodeType, p.Min(), p.Max())
		pa.Name = pulumi.String(p.Name)
		pa.Labels = pulumi.ToStringMap(contract.Labels)
		pa.Tags = pulumi.ToStringArray(scaleway.Tags(naming.CostLabels(stack, p.Name, contract.Model.Key)))
		pa.Taints = poolTaints(contract.Taints())
		pool, err := kubernetes.NewPool(ctx, name+"-"+p.Name, pa, pulumi.Parent(comp), ignoreSize(),
			// The pool's name is fixed and node type or zone changes force replacement: the old pool must go first.
			// GPU quota rarely fits both at once anyway.
			pulumi.DeleteBeforeReplace(true),
			// A pool given to a tenant, taken from one or handed to another gets new nodes: a taint changed in place
			// evicts no running pod (NoSchedule) and leaves the nodes' image caches (docs/threat-model.md, "Shared nodes").
			pulumi.ReplaceOnChanges([]string{"taints"}))
		if err != nil {
			return nil, fmt.Errorf("creating GPU pool %q of Kapsule cluster %q: %w", p.Name, name, err)
		}
		comp.GPUPools = append(comp.GPUPools, pool)
		comp.pools = append(comp.pools, contract)
		pools = append(pools, pool)
	}

	kubeconfig := comp.Kapsule.Kubeconfigs.ApplyT(func(kcs []kubernetes.ClusterKubeconfig) (string, error) {
		if len(kcs) == 0 || kcs[0].ConfigFile == nil {
			return "", fmt.Errorf("Kapsule cluster %q returned no kubeconfig", name)
		}
		return *kcs[0].ConfigFile, nil
	}).(pulumi.StringOutput)
	comp.Kubeconfig = pulumi.ToSecret(kubeconfig).(pulumi.StringOutput)
	// A new Kapsule cluster hands out a kubeconfig before its API answers: it waits in pool_required until a pool
	// exists (pulumiverse/pulumi-scaleway sdk/go/scaleway/kubernetes/cluster.go example). The provider waits for every
	// pool, as on GKE.
	comp.Provider, err = cluster.NewProvider(ctx, name, comp.Kubeconfig, comp.Kapsule.ID().ToStringOutput(),
		pulumi.Parent(comp), pulumi.DependsOn(pools))
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes provider for Kapsule cluster %q: %w", name, err)
	}

	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{
		"kubeconfig":       comp.Kubeconfig,
		"clusterName":      comp.ClusterName,
		"apiServer":        comp.APIServer,
		"privateNetworkId": comp.PrivateNetwork.ID(),
	}); err != nil {
		return nil, fmt.Errorf("registering outputs of Kapsule cluster %q: %w", name, err)
	}
	return comp, nil
}

// Contract returns the cluster contract the in-cluster layer builds on.
func (c *Cluster) Contract() *cluster.Cluster {
	return &cluster.Cluster{
		Flavour:      cluster.Scaleway,
		Provider:     c.Provider,
		Kubeconfig:   c.Kubeconfig,
		GPUPools:     append([]cluster.GPUPool(nil), c.pools...),
		DriverRoot:   scaleway.DriverRoot,
		PlatformPool: c.TenantPool != nil,
		Anchor:       c.Kapsule,
		// Kapsule runs the control plane itself; that it uses the standard identities is UNCONFIRMED: a stack adds
		// others with admission.claimStatusWriters.
		ClaimStatusWriters: slices.Clone(cluster.StandardClaimStatusWriters),
	}
}

func kapsuleArgs(args *scaleway.ClusterArgs, pn *network.PrivateNetwork, stack string) *kubernetes.ClusterArgs {
	day := args.AutoUpgrade.MaintenanceWindowDay
	if day == "" {
		day = "any"
	}
	hour := 0
	if h := args.AutoUpgrade.MaintenanceWindowStartHour; h != nil {
		hour = *h
	}
	return &kubernetes.ClusterArgs{
		// Only a range of the stack's own is sent: a cluster made with Kapsule's keeps it, as the field replaces the
		// cluster (pulumi-scaleway v1.53.0 sdk/go/scaleway/kubernetes/cluster.go ServiceCidr).
		ServiceCidr:               optional(args.ServiceRange.CIDR),
		Region:                    pulumi.String(scaleway.Region(args.Zone)),
		Version:                   pulumi.String(args.KubernetesVersion),
		Cni:                       pulumi.String(args.CNI),
		PrivateNetworkId:          pn.ID(),
		DeleteAdditionalResources: pulumi.Bool(args.DeleteAdditionalResources),
		Tags:                      pulumi.ToStringArray(scaleway.Tags(naming.CostLabels(stack, "", ""))),
		// Always sent, so turning auto-upgrade off is a change the provider sees.
		AutoUpgrade: &kubernetes.ClusterAutoUpgradeArgs{
			Enable:                     pulumi.Bool(args.AutoUpgrade.IsEnabled()),
			MaintenanceWindowDay:       pulumi.String(day),
			MaintenanceWindowStartHour: pulumi.Int(hour),
		},
		AutoscalerConfig: &kubernetes.ClusterAutoscalerConfigArgs{
			DisableScaleDown:            pulumi.Bool(args.Autoscaler.DisableScaleDown),
			ScaleDownDelayAfterAdd:      optional(args.Autoscaler.ScaleDownDelayAfterAdd),
			ScaleDownUnneededTime:       optional(args.Autoscaler.ScaleDownUnneededTime),
			Expander:                    optional(args.Autoscaler.Expander),
			IgnoreDaemonsetsUtilization: pulumi.Bool(args.Autoscaler.IgnoreDaemonsetsUtilization),
		},
	}
}

// optional leaves an empty setting unset, so the provider keeps its default.
func optional(s string) pulumi.StringPtrInput {
	if s == "" {
		return nil
	}
	return pulumi.String(s)
}

func poolArgs(args *scaleway.ClusterArgs, kapsule *kubernetes.Cluster, nodeType string, minNodes, maxNodes int) *kubernetes.PoolArgs {
	return &kubernetes.PoolArgs{
		ClusterId: kapsule.ID(),
		Zone:      pulumi.String(args.Zone),
		NodeType:  pulumi.String(nodeType),
		// With autoscaling, Size only counts at creation (pulumi-scaleway kubernetes/pool.go).
		Size:             pulumi.Int(minNodes),
		MinSize:          pulumi.Int(minNodes),
		MaxSize:          pulumi.Int(maxNodes),
		Autoscaling:      pulumi.Bool(true),
		Autohealing:      pulumi.Bool(true),
		WaitForPoolReady: pulumi.Bool(true),
	}
}

// newCPUPool creates a pool without GPUs, the system pool or the tenant pool (role, its cost tag's value), labelled
// and tainted as the platform's own when platform is set (cluster.SystemPoolNodes). Autonamed, so a replacement is
// created before the old pool goes: a Kapsule cluster without a pool has no API.
func newCPUPool(ctx *pulumi.Context, name, role string, args *scaleway.ClusterArgs, size scaleway.SystemPoolArgs, platform bool,
	stack string, parent *Cluster) (*kubernetes.Pool, error) {
	minNodes, maxNodes := size.Bounds()
	pa := poolArgs(args, parent.Kapsule, size.NodeTypeOrDefault(), minNodes, maxNodes)
	pa.Tags = pulumi.ToStringArray(scaleway.Tags(naming.CostLabels(stack, role, "")))
	if labels, taints := cluster.SystemPoolNodes(platform); labels != nil {
		pa.Labels = pulumi.ToStringMap(labels)
		pa.Taints = poolTaints(taints)
	}
	return kubernetes.NewPool(ctx, name+"-"+role, pa, pulumi.Parent(parent), ignoreSize(),
		// A system pool that becomes the platform's own gets new nodes: a NoSchedule taint added in place evicts no
		// tenant pod already there (docs/threat-model.md, "Cloud identity and node services").
		pulumi.ReplaceOnChanges([]string{"taints"}))
}

// poolTaints are the taints as a Kapsule pool takes them, in Kubernetes casing.
func poolTaints(taints []cluster.Taint) kubernetes.PoolTaintArray {
	var out kubernetes.PoolTaintArray
	for _, t := range taints {
		out = append(out, &kubernetes.PoolTaintArgs{Key: pulumi.String(t.Key), Value: pulumi.String(t.Value), Effect: pulumi.String(t.Effect)})
	}
	return out
}

// ignoreSize leaves the node count to the autoscaler.
func ignoreSize() pulumi.ResourceOption {
	return pulumi.IgnoreChanges([]string{"size"})
}
