// Package scaleway builds a Kapsule cluster for DRA-managed GPUs: its private network, the cluster (Cilium), a system
// pool and one pool per GPU pool, plus the kubernetes provider that reaches it.
package scaleway

import (
	"errors"
	"fmt"
	"strings"

	k8s "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-scaleway/sdk/go/scaleway/kubernetes"
	"github.com/pulumiverse/pulumi-scaleway/sdk/go/scaleway/network"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
)

// MIGConfigLabel asks the mig-manager of the GPU Operator, which Scaleway installs on every GPU pool, to partition the
// node's GPUs; the value names a profile set of its default config, "all-<profile>"
// (scaleway/docs-content pages/gpu/how-to/use-mig-with-kubernetes.mdx). As a pool label Scaleway keeps it applied.
const MIGConfigLabel = "nvidia.com/mig.config"

// ClusterArgs describe the cluster. The pipeline has validated them against the stack config.
type ClusterArgs struct {
	// Zone holds the pools; GPUs exist only in fr-par-2 and pl-waw-2 (gpu-facts.md 3.4).
	Zone string
	// Region holds the private network and the control plane.
	Region string
	// KubernetesVersion must be a minor version such as "1.35" when auto-upgrade is on.
	KubernetesVersion string
	// CNI is cilium or calico; it cannot change after creation.
	CNI string
	// DeleteAdditionalResources deletes volumes and load balancers the cluster created when it is deleted.
	DeleteAdditionalResources bool
	AutoUpgrade               AutoUpgradeArgs
	Autoscaler                AutoscalerArgs
	SystemPool                SystemPoolArgs
	GPUPools                  []GPUPoolArgs
}

// AutoUpgradeArgs configure patch upgrades of the control plane.
type AutoUpgradeArgs struct {
	Enabled bool
	// MaintenanceWindowDay is monday to sunday, or any; "" means any.
	MaintenanceWindowDay string
	// MaintenanceWindowStartHour is the UTC hour (0-23) the two-hour window starts.
	MaintenanceWindowStartHour int
}

// AutoscalerArgs tune the cluster autoscaler; zero values keep Scaleway's defaults.
type AutoscalerArgs struct {
	DisableScaleDown bool
	// ScaleDownDelayAfterAdd is a duration such as "10m".
	ScaleDownDelayAfterAdd string
	// ScaleDownUnneededTime is a duration such as "10m".
	ScaleDownUnneededTime string
	// Expander is random, least_waste, most_pods, priority or price.
	Expander string
	// IgnoreDaemonsetsUtilization lets GPU nodes, which run many DaemonSets, scale down when their GPUs are idle.
	IgnoreDaemonsetsUtilization bool
}

// SystemPoolArgs size the pool that runs everything but GPU workloads.
type SystemPoolArgs struct {
	NodeType string
	MinNodes int
	MaxNodes int
}

// GPUPoolArgs describe one GPU pool.
type GPUPoolArgs struct {
	// Name names the pool and its gpu-tenancy.io/pool label.
	Name string
	// NodeType is the instance type, such as L4-1-24G or H100-1-80G.
	NodeType    string
	GPUsPerNode int
	// Partition is the MIG profile the GPUs are split into, or "" for whole GPUs.
	Partition string
	MinNodes  int
	MaxNodes  int
	Model     cluster.GPUModel
}

// Cluster is a Kapsule cluster with its network, pools and the kubernetes provider that reaches it.
type Cluster struct {
	pulumi.ResourceState

	PrivateNetwork *network.PrivateNetwork
	Kapsule        *kubernetes.Cluster
	SystemPool     *kubernetes.Pool
	GPUPools       []*kubernetes.Pool
	Provider       *k8s.Provider
	// Kubeconfig carries an admin token; it is a secret.
	Kubeconfig  pulumi.StringOutput
	ClusterName pulumi.StringOutput
	APIServer   pulumi.StringOutput

	pools []cluster.GPUPool
}

// NewCluster creates the network, the cluster, its pools and its kubernetes provider.
func NewCluster(ctx *pulumi.Context, name string, args *ClusterArgs, opts ...pulumi.ResourceOption) (*Cluster, error) {
	if err := checkArgs(args); err != nil {
		return nil, fmt.Errorf("Kapsule cluster %q: %w", name, err)
	}
	comp := &Cluster{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:scaleway:Cluster", name, comp, opts...); err != nil {
		return nil, fmt.Errorf("registering Kapsule cluster %q: %w", name, err)
	}

	var err error
	// Kapsule requires a private network (pulumi-anchors.md 2.4).
	comp.PrivateNetwork, err = network.NewPrivateNetwork(ctx, name, &network.PrivateNetworkArgs{
		Region: pulumi.String(args.Region),
	}, pulumi.Parent(comp))
	if err != nil {
		return nil, fmt.Errorf("creating private network of Kapsule cluster %q: %w", name, err)
	}

	// The SDK marks the kubeconfigs output secret itself (AdditionalSecretOutputs in kubernetes.NewCluster).
	comp.Kapsule, err = kubernetes.NewCluster(ctx, name, kapsuleArgs(args, comp.PrivateNetwork), pulumi.Parent(comp))
	if err != nil {
		return nil, fmt.Errorf("creating Kapsule cluster %q: %w", name, err)
	}
	comp.ClusterName = comp.Kapsule.Name
	comp.APIServer = comp.Kapsule.ApiserverUrl

	// Autonamed, so a replacement is created before the old pool goes: a Kapsule cluster without a pool has no API.
	comp.SystemPool, err = kubernetes.NewPool(ctx, name+"-system",
		poolArgs(args, comp.Kapsule, args.SystemPool.NodeType, args.SystemPool.MinNodes, args.SystemPool.MaxNodes),
		pulumi.Parent(comp), ignoreSize())
	if err != nil {
		return nil, fmt.Errorf("creating system pool of Kapsule cluster %q: %w", name, err)
	}

	pools := []pulumi.Resource{comp.SystemPool}
	for _, p := range args.GPUPools {
		contract := gpuPoolContract(p)
		pa := poolArgs(args, comp.Kapsule, p.NodeType, p.MinNodes, p.MaxNodes)
		pa.Name = pulumi.String(p.Name)
		pa.Labels = pulumi.ToStringMap(contract.Labels)
		pa.Taints = kubernetes.PoolTaintArray{&kubernetes.PoolTaintArgs{
			Key:    pulumi.String(contract.Taint.Key),
			Value:  pulumi.String(contract.Taint.Value),
			Effect: pulumi.String(contract.Taint.Effect),
		}}
		pool, err := kubernetes.NewPool(ctx, name+"-"+p.Name, pa, pulumi.Parent(comp), ignoreSize(),
			// The pool's name is fixed and node type or zone changes force replacement: the old pool must go first.
			// GPU quota rarely fits both at once anyway.
			pulumi.DeleteBeforeReplace(true))
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
	// exists (pulumi-scaleway kubernetes/cluster.go example). The provider waits for every pool, as on GKE.
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
		Flavour:    cluster.Scaleway,
		Provider:   c.Provider,
		Kubeconfig: c.Kubeconfig,
		GPUPools:   append([]cluster.GPUPool(nil), c.pools...),
		Anchor:     c.Kapsule,
	}
}

func checkArgs(args *ClusterArgs) error {
	if args == nil {
		return errors.New("args are required")
	}
	if args.Zone == "" || args.Region == "" {
		return errors.New("zone and region are required")
	}
	if !strings.HasPrefix(args.Zone, args.Region+"-") {
		return fmt.Errorf("zone %q is not in region %q", args.Zone, args.Region)
	}
	return nil
}

func kapsuleArgs(args *ClusterArgs, pn *network.PrivateNetwork) *kubernetes.ClusterArgs {
	day := args.AutoUpgrade.MaintenanceWindowDay
	if day == "" {
		day = "any"
	}
	return &kubernetes.ClusterArgs{
		Region:                    pulumi.String(args.Region),
		Version:                   pulumi.String(args.KubernetesVersion),
		Cni:                       pulumi.String(args.CNI),
		PrivateNetworkId:          pn.ID(),
		DeleteAdditionalResources: pulumi.Bool(args.DeleteAdditionalResources),
		// Always sent, so turning auto-upgrade off is a change the provider sees.
		AutoUpgrade: &kubernetes.ClusterAutoUpgradeArgs{
			Enable:                     pulumi.Bool(args.AutoUpgrade.Enabled),
			MaintenanceWindowDay:       pulumi.String(day),
			MaintenanceWindowStartHour: pulumi.Int(args.AutoUpgrade.MaintenanceWindowStartHour),
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

func poolArgs(args *ClusterArgs, kapsule *kubernetes.Cluster, nodeType string, minNodes, maxNodes int) *kubernetes.PoolArgs {
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

// ignoreSize leaves the node count to the autoscaler.
func ignoreSize() pulumi.ResourceOption {
	return pulumi.IgnoreChanges([]string{"size"})
}

func gpuPoolContract(p GPUPoolArgs) cluster.GPUPool {
	// Not nvidia.com/dra-kubelet-plugin: the GPU Operator's driver manager flips that label during driver upgrades,
	// and Scaleway would reconcile a pool label back.
	labels := cluster.GPUNodeLabels(p.Name)
	if p.Partition != "" {
		labels[MIGConfigLabel] = "all-" + p.Partition
	}
	return cluster.GPUPool{
		Name:        p.Name,
		Model:       p.Model,
		GPUsPerNode: p.GPUsPerNode,
		MIGProfile:  p.Partition,
		Labels:      labels,
		Taint:       cluster.GPUTaint,
	}
}
