// Package scaleway builds a Kapsule cluster for DRA-managed GPUs: its private network, the cluster (Cilium), a system
// pool and one pool per GPU pool, plus the kubernetes provider that reaches it.
package scaleway

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	k8s "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumiverse/pulumi-scaleway/sdk/go/scaleway/kubernetes"
	"github.com/pulumiverse/pulumi-scaleway/sdk/go/scaleway/network"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// ClusterArgs describe the cluster; a stack's `scaleway` block decodes into it and its `gpuPools` into GPUPools.
type ClusterArgs struct {
	// Zone holds the pools; its region holds the private network and the control plane.
	Zone string `json:"zone"`
	// KubernetesVersion must be a minor version such as "1.35" while auto-upgrade is on.
	KubernetesVersion string `json:"kubernetesVersion"`
	// CNI is cilium or calico; it cannot change after creation.
	CNI string `json:"cni"`
	// DeleteAdditionalResources deletes volumes and load balancers the cluster created when it is deleted.
	DeleteAdditionalResources bool `json:"deleteAdditionalResources"`
	// AllowUnlistedZone accepts a zone the node-type table does not list for a pool's node type.
	AllowUnlistedZone bool            `json:"allowUnlistedZone"`
	AutoUpgrade       AutoUpgradeArgs `json:"autoUpgrade"`
	Autoscaler        AutoscalerArgs  `json:"autoscaler"`
	SystemPool        SystemPoolArgs  `json:"systemPool"`
	GPUPools          []GPUPoolSpec   `json:"-"`
}

// AutoUpgradeArgs configure patch upgrades of the control plane.
type AutoUpgradeArgs struct {
	// Enabled defaults to true.
	Enabled *bool `json:"enabled"`
	// MaintenanceWindowDay is monday to sunday, or any; "" means any.
	MaintenanceWindowDay string `json:"maintenanceWindowDay"`
	// MaintenanceWindowStartHour is the UTC hour (0-23) the two-hour window starts; unset means 0.
	MaintenanceWindowStartHour *int `json:"maintenanceWindowStartHour"`
}

func (u AutoUpgradeArgs) enabled() bool { return u.Enabled == nil || *u.Enabled }

// AutoscalerArgs tune the cluster autoscaler; zero values keep Scaleway's defaults.
type AutoscalerArgs struct {
	DisableScaleDown bool `json:"disableScaleDown"`
	// ScaleDownDelayAfterAdd is a duration such as "10m".
	ScaleDownDelayAfterAdd string `json:"scaleDownDelayAfterAdd"`
	// ScaleDownUnneededTime is a duration such as "10m".
	ScaleDownUnneededTime string `json:"scaleDownUnneededTime"`
	// Expander is random, least_waste, most_pods, priority or price.
	Expander string `json:"expander"`
	// IgnoreDaemonsetsUtilization lets GPU nodes, which run many DaemonSets, scale down when their GPUs are idle.
	IgnoreDaemonsetsUtilization bool `json:"ignoreDaemonsetsUtilization"`
}

// SystemPoolArgs size the pool that runs everything but GPU workloads; empty fields take PRO2-S, 1 and 3.
type SystemPoolArgs struct {
	NodeType string `json:"nodeType"`
	cluster.NodeBounds
}

func (s SystemPoolArgs) nodeType() string {
	if s.NodeType == "" {
		// UNCONFIRMED that PRO2-S is offered in every Kapsule zone; Scaleway's Kapsule examples use PRO2 and DEV1 types.
		return "PRO2-S"
	}
	return s.NodeType
}

func (s SystemPoolArgs) bounds() (int, int) { return s.Or(1, 3) }

// Config defaults the README documents for a stack's `scaleway` block.
const (
	DefaultKubernetesVersion = "1.35"
	DefaultCNI               = "cilium"
	DefaultMaintenanceDay    = "sunday"
	DefaultMaintenanceHour   = 3
)

// WithDefaults returns the args with the stack config's defaults filled in.
func (a ClusterArgs) WithDefaults() ClusterArgs {
	if a.KubernetesVersion == "" {
		a.KubernetesVersion = DefaultKubernetesVersion
	}
	if a.CNI == "" {
		a.CNI = DefaultCNI
	}
	if a.AutoUpgrade.Enabled == nil {
		a.AutoUpgrade.Enabled = ptr(true)
	}
	if a.AutoUpgrade.MaintenanceWindowDay == "" {
		a.AutoUpgrade.MaintenanceWindowDay = DefaultMaintenanceDay
	}
	if a.AutoUpgrade.MaintenanceWindowStartHour == nil {
		a.AutoUpgrade.MaintenanceWindowStartHour = ptr(DefaultMaintenanceHour)
	}
	return a
}

// Region is the region of a Scaleway zone (fr-par-2: fr-par).
func Region(zone string) string {
	if i := strings.LastIndex(zone, "-"); i > 0 {
		return zone[:i]
	}
	return zone
}

func ptr[T any](v T) *T { return &v }

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
	if args == nil {
		return nil, fmt.Errorf("Kapsule cluster %q: args are required", name)
	}
	if errs := args.Validate(field.NewPath("scaleway"), field.NewPath("gpuPools")); len(errs) > 0 {
		return nil, fmt.Errorf("Kapsule cluster %q: %w", name, errs.ToAggregate())
	}
	comp := &Cluster{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:scaleway:Cluster", name, comp, opts...); err != nil {
		return nil, fmt.Errorf("registering Kapsule cluster %q: %w", name, err)
	}

	var err error
	// Kapsule requires a private network (pulumiverse/pulumi-scaleway sdk/go/scaleway/kubernetes/cluster.go PrivateNetworkId).
	comp.PrivateNetwork, err = network.NewPrivateNetwork(ctx, name, &network.PrivateNetworkArgs{
		Region: pulumi.String(Region(args.Zone)),
	}, pulumi.Parent(comp))
	if err != nil {
		return nil, fmt.Errorf("creating private network of Kapsule cluster %q: %w", name, err)
	}

	stack := naming.CostStackValue(ctx.Project(), ctx.Stack())
	// The SDK marks the kubeconfigs output secret itself (AdditionalSecretOutputs in kubernetes.NewCluster).
	comp.Kapsule, err = kubernetes.NewCluster(ctx, name, kapsuleArgs(args, comp.PrivateNetwork, stack), pulumi.Parent(comp))
	if err != nil {
		return nil, fmt.Errorf("creating Kapsule cluster %q: %w", name, err)
	}
	comp.ClusterName = comp.Kapsule.Name
	comp.APIServer = comp.Kapsule.ApiserverUrl

	// Autonamed, so a replacement is created before the old pool goes: a Kapsule cluster without a pool has no API.
	sysMin, sysMax := args.SystemPool.bounds()
	sysArgs := poolArgs(args, comp.Kapsule, args.SystemPool.nodeType(), sysMin, sysMax)
	sysArgs.Tags = pulumi.ToStringArray(tags(naming.CostLabels(stack, naming.CostSystemPool, "")))
	comp.SystemPool, err = kubernetes.NewPool(ctx, name+"-system", sysArgs, pulumi.Parent(comp), ignoreSize())
	if err != nil {
		return nil, fmt.Errorf("creating system pool of Kapsule cluster %q: %w", name, err)
	}

	pools := []pulumi.Resource{comp.SystemPool}
	for _, p := range args.GPUPools {
		contract, _ := PoolContract(p)
		pa := poolArgs(args, comp.Kapsule, p.NodeType, p.Min(), p.Max())
		pa.Name = pulumi.String(p.Name)
		pa.Labels = pulumi.ToStringMap(contract.Labels)
		pa.Tags = pulumi.ToStringArray(tags(naming.CostLabels(stack, p.Name, contract.Model.Key)))
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
		Flavour:    cluster.Scaleway,
		Provider:   c.Provider,
		Kubeconfig: c.Kubeconfig,
		GPUPools:   append([]cluster.GPUPool(nil), c.pools...),
		DriverRoot: DriverRoot,
		Anchor:     c.Kapsule,
		// Kapsule runs the control plane itself; that it uses the standard identities is UNCONFIRMED: a stack adds
		// others with admission.claimStatusWriters.
		ClaimStatusWriters: slices.Clone(cluster.StandardClaimStatusWriters),
	}
}

func kapsuleArgs(args *ClusterArgs, pn *network.PrivateNetwork, stack string) *kubernetes.ClusterArgs {
	day := args.AutoUpgrade.MaintenanceWindowDay
	if day == "" {
		day = "any"
	}
	hour := 0
	if h := args.AutoUpgrade.MaintenanceWindowStartHour; h != nil {
		hour = *h
	}
	return &kubernetes.ClusterArgs{
		Region:                    pulumi.String(Region(args.Zone)),
		Version:                   pulumi.String(args.KubernetesVersion),
		Cni:                       pulumi.String(args.CNI),
		PrivateNetworkId:          pn.ID(),
		DeleteAdditionalResources: pulumi.Bool(args.DeleteAdditionalResources),
		Tags:                      pulumi.ToStringArray(tags(naming.CostLabels(stack, "", ""))),
		// Always sent, so turning auto-upgrade off is a change the provider sees.
		AutoUpgrade: &kubernetes.ClusterAutoUpgradeArgs{
			Enable:                     pulumi.Bool(args.AutoUpgrade.enabled()),
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
