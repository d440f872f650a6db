// Package gkecluster builds the GKE cluster package gke describes, with the pulumi-gcp SDK: the control plane, a small
// system pool and one node pool per GPU pool, plus the kubernetes provider that reaches it. Importing it registers the
// gke flavour's builder (cluster.RegisterBuilder), so only the programs that build GKE clusters link the SDK.
package gkecluster

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/pulumi/pulumi-gcp/sdk/v8/go/gcp/container"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

func init() { cluster.RegisterBuilder(cluster.GKE, cluster.Typed(cluster.GKE, NewCluster)) }

// Cluster is a GKE cluster with its pools and the kubernetes provider that reaches it.
type Cluster struct {
	pulumi.ResourceState

	ControlPlane *container.Cluster
	SystemPool   *container.NodePool
	// TenantPool runs the tenants' pods that need no GPU; nil without gke.tenantPool.
	TenantPool *container.NodePool
	GPUPools   []*container.NodePool
	Provider   *kubernetes.Provider
	// Kubeconfig authenticates through gke-gcloud-auth-plugin; it is a secret.
	Kubeconfig  pulumi.StringOutput
	ClusterName pulumi.StringOutput
	Endpoint    pulumi.StringOutput

	pools []cluster.GPUPool
}

// taintEffects maps Kubernetes taint effects to the GKE API's spelling (pulumi-gcp sdk v8
// go/gcp/container/pulumiTypes.go NodePoolNodeConfigTaint: NO_SCHEDULE, PREFER_NO_SCHEDULE, NO_EXECUTE).
var taintEffects = map[string]string{
	"NoSchedule":       "NO_SCHEDULE",
	"PreferNoSchedule": "PREFER_NO_SCHEDULE",
	"NoExecute":        "NO_EXECUTE",
}

// NewCluster creates the cluster, its pools and its kubernetes provider.
func NewCluster(ctx *pulumi.Context, name string, args *gke.ClusterArgs, opts ...pulumi.ResourceOption) (*Cluster, error) {
	if args == nil {
		return nil, fmt.Errorf("GKE cluster %q: args are required", name)
	}
	if errs := args.Validate(field.NewPath("gke"), field.NewPath("gpuPools"), time.Now()); len(errs) > 0 {
		return nil, fmt.Errorf("GKE cluster %q: %w", name, errs.ToAggregate())
	}
	comp := &Cluster{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:gke:Cluster", name, comp, opts...); err != nil {
		return nil, fmt.Errorf("registering GKE cluster %q: %w", name, err)
	}

	stack := naming.CostStackValue(ctx.Project(), ctx.Stack())
	controlPlane, err := container.NewCluster(ctx, name, controlPlaneArgs(args, stack), pulumi.Parent(comp),
		pulumi.Protect(args.ServiceRange.Protect))
	if err != nil {
		return nil, fmt.Errorf("creating GKE cluster %q: %w", name, err)
	}
	comp.ControlPlane = controlPlane
	comp.ClusterName = controlPlane.Name
	comp.Endpoint = controlPlane.Endpoint

	comp.SystemPool, err = newCPUPool(ctx, name, naming.CostSystemPool, args, args.SystemPool, args.PlatformPool(), stack, controlPlane, comp)
	if err != nil {
		return nil, fmt.Errorf("creating system pool of GKE cluster %q: %w", name, err)
	}
	pools := []pulumi.Resource{comp.SystemPool}
	if args.TenantPool != nil {
		comp.TenantPool, err = newCPUPool(ctx, name, naming.CostTenantPool, args, *args.TenantPool, false, stack, controlPlane, comp)
		if err != nil {
			return nil, fmt.Errorf("creating tenant pool of GKE cluster %q: %w", name, err)
		}
		pools = append(pools, comp.TenantPool)
	}
	for _, p := range args.GPUPools {
		contract, _ := gke.PoolContract(p)
		pool, err := newGPUPool(ctx, name, args, p, contract, stack, controlPlane, comp)
		if err != nil {
			return nil, fmt.Errorf("creating GPU pool %q of GKE cluster %q: %w", p.Name, name, err)
		}
		comp.GPUPools = append(comp.GPUPools, pool)
		comp.pools = append(comp.pools, contract)
		pools = append(pools, pool)
	}

	comp.Kubeconfig = pulumi.ToSecret(kubeconfig(args, controlPlane)).(pulumi.StringOutput)
	// The provider waits for the pools: in-cluster workloads need nodes, and the pools' labels must exist before
	// anything selects on them.
	comp.Provider, err = cluster.NewProvider(ctx, name, comp.Kubeconfig, controlPlane.ID().ToStringOutput(),
		pulumi.Parent(comp), pulumi.DependsOn(pools))
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes provider for GKE cluster %q: %w", name, err)
	}

	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{
		"kubeconfig":  comp.Kubeconfig,
		"clusterName": comp.ClusterName,
		"endpoint":    comp.Endpoint,
	}); err != nil {
		return nil, fmt.Errorf("registering outputs of GKE cluster %q: %w", name, err)
	}
	return comp, nil
}

// Contract returns the cluster contract the in-cluster layer builds on.
func (c *Cluster) Contract() *cluster.Cluster {
	return &cluster.Cluster{
		Flavour:      cluster.GKE,
		Provider:     c.Provider,
		Kubeconfig:   c.Kubeconfig,
		GPUPools:     append([]cluster.GPUPool(nil), c.pools...),
		DriverRoot:   gke.DriverRoot,
		PlatformPool: c.TenantPool != nil,
		Anchor:       c.ControlPlane,
		// GKE runs the scheduler and controller-manager itself; that it uses the standard identities is UNCONFIRMED:
		// a stack adds others with admission.claimStatusWriters.
		ClaimStatusWriters: slices.Clone(cluster.StandardClaimStatusWriters),
	}
}

func controlPlaneArgs(args *gke.ClusterArgs, stack string) *container.ClusterArgs {
	cp := &container.ClusterArgs{
		Project: pulumi.String(args.Project),
		// A zone, not a region: one control plane, and pools default to this zone only.
		Location:           pulumi.String(args.Zone),
		DeletionProtection: pulumi.Bool(args.DeletionProtection == nil || *args.DeletionProtection),
		WorkloadIdentityConfig: &container.ClusterWorkloadIdentityConfigArgs{
			WorkloadPool: pulumi.String(args.Project + ".svc.id.goog"),
		},
		// Pools are separate resources: editing inline pools would replace the cluster (pulumi/pulumi-google-native#730).
		RemoveDefaultNodePool: pulumi.Bool(true),
		InitialNodeCount:      pulumi.Int(1),
		// GKE enforces NetworkPolicy only with Dataplane V2 (or the Calico add-on); without it the tenants' isolation
		// and metadata-endpoint block would be silently ignored (cloud.google.com/kubernetes-engine/docs/concepts/dataplane-v2).
		DatapathProvider: pulumi.String("ADVANCED_DATAPATH"),
		// Managed collection runs the scrapes of ClusterPodMonitoring objects, which the alerts read
		// (https://cloud.google.com/stackdriver/docs/managed-prometheus/setup-managed); SYSTEM_COMPONENTS is GKE's own
		// default, stated so the block is complete.
		MonitoringConfig: &container.ClusterMonitoringConfigArgs{
			EnableComponents:  pulumi.ToStringArray([]string{"SYSTEM_COMPONENTS"}),
			ManagedPrometheus: &container.ClusterMonitoringConfigManagedPrometheusArgs{Enabled: pulumi.Bool(true)},
		},
		// Cost allocation puts each workload's namespace and Kubernetes labels into the Cloud Billing export, next to
		// the resource labels (https://cloud.google.com/kubernetes-engine/docs/how-to/cost-allocations).
		CostManagementConfig: &container.ClusterCostManagementConfigArgs{Enabled: pulumi.Bool(true)},
		// A Service's externalIPs capture every pod's traffic to those addresses, other tenants' included
		// (CVE-2020-8554, kubernetes/kubernetes#97076); GKE refuses them with this off. The tenants' admission policy
		// refuses them too, on every cloud. GKE changes it in place on an existing cluster (ClusterUpdate
		// desiredServiceExternalIpsConfig: https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/ClusterUpdate).
		ServiceExternalIpsConfig: &container.ClusterServiceExternalIpsConfigArgs{Enabled: pulumi.Bool(false)},
		ResourceLabels:           pulumi.ToStringMap(naming.CostLabels(stack, "", "")),
		// The optimize-utilization profile makes a GKE webhook set every pod's scheduler to
		// gke.io/optimize-utilization-scheduler (https://cloud.google.com/kubernetes-engine/docs/concepts/cluster-autoscaler,
		// "Autoscaling profiles"), which the tenants' guards would refuse; stated so no one switches it on by the console
		// without a diff. Node auto-provisioning stays off: the GPU pools are the project's.
		ClusterAutoscaling: &container.ClusterClusterAutoscalingArgs{
			AutoscalingProfile: pulumi.String("BALANCED"), Enabled: pulumi.Bool(false),
		},
	}
	// Only a range of the stack's own is sent: a cluster made with GKE's keeps it, as the field replaces the cluster
	// (hashicorp/terraform-provider-google v6.49.2 resource_container_cluster.go services_ipv4_cidr_block ForceNew).
	if args.ServiceRange.CIDR != "" {
		cp.IpAllocationPolicy = &container.ClusterIpAllocationPolicyArgs{ServicesIpv4CidrBlock: pulumi.String(args.ServiceRange.CIDR)}
	}
	if args.ReleaseChannel != "" {
		cp.ReleaseChannel = &container.ClusterReleaseChannelArgs{Channel: pulumi.String(args.ReleaseChannel)}
	}
	if args.KubernetesVersion != "" {
		cp.MinMasterVersion = pulumi.String(args.KubernetesVersion)
	}
	return cp
}

// newCPUPool creates a pool without GPUs, the system pool or the tenant pool (role, its cost label's value), labelled
// and tainted as the platform's own when platform is set (cluster.SystemPoolNodes). Autonamed, so a replacement is
// created before the old pool goes and system workloads always have nodes.
func newCPUPool(ctx *pulumi.Context, name, role string, args *gke.ClusterArgs, size gke.SystemPoolArgs, platform bool,
	stack string, controlPlane *container.Cluster, parent pulumi.Resource) (*container.NodePool, error) {
	minNodes, maxNodes := size.Bounds()
	nodeLabels, taints := cluster.SystemPoolNodes(platform)
	nodeTaints, err := gkeTaints(taints)
	if err != nil {
		return nil, err
	}
	var labels pulumi.StringMap
	if nodeLabels != nil {
		labels = pulumi.ToStringMap(nodeLabels)
	}
	return container.NewNodePool(ctx, name+"-"+role, &container.NodePoolArgs{
		Cluster:          controlPlane.Name,
		Location:         pulumi.String(args.Zone),
		Project:          pulumi.String(args.Project),
		NodeLocations:    pulumi.StringArray{pulumi.String(args.Zone)},
		InitialNodeCount: pulumi.Int(minNodes),
		Autoscaling:      autoscaling(minNodes, maxNodes),
		Management:       management(),
		NodeConfig: &container.NodePoolNodeConfigArgs{
			MachineType:            pulumi.String(size.MachineTypeOrDefault()),
			WorkloadMetadataConfig: gkeMetadata(),
			KubeletConfig:          kubeletConfig(),
			ResourceLabels:         pulumi.ToStringMap(naming.CostLabels(stack, role, "")),
			Labels:                 labels,
			Taints:                 nodeTaints,
		},
	}, pulumi.Parent(parent), ignoreNodeCounts(),
		// A system pool that becomes the platform's own gets new nodes: a NoSchedule taint added in place evicts no
		// tenant pod already there (docs/threat-model.md, "Cloud identity and node services").
		pulumi.ReplaceOnChanges([]string{"nodeConfig.taints"}))
}

// gkeTaints are the taints in the GKE API's spelling.
func gkeTaints(taints []cluster.Taint) (container.NodePoolNodeConfigTaintArray, error) {
	var out container.NodePoolNodeConfigTaintArray
	for _, t := range taints {
		effect, ok := taintEffects[t.Effect]
		if !ok {
			return nil, fmt.Errorf("taint effect %q has no GKE spelling", t.Effect)
		}
		out = append(out, &container.NodePoolNodeConfigTaintArgs{
			Key: pulumi.String(t.Key), Value: pulumi.String(t.Value), Effect: pulumi.String(effect)})
	}
	return out, nil
}

func newGPUPool(ctx *pulumi.Context, name string, args *gke.ClusterArgs, p gke.GPUPoolSpec, contract cluster.GPUPool, stack string,
	controlPlane *container.Cluster, parent pulumi.Resource) (*container.NodePool, error) {
	taints, err := gkeTaints(contract.Taints())
	if err != nil {
		return nil, err
	}
	accelerator := &container.NodePoolNodeConfigGuestAcceleratorArgs{
		Type:  pulumi.String(p.Accelerator),
		Count: pulumi.Int(contract.GPUsPerNode),
		// The DRA driver needs a driver GKE did not install (https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra).
		GpuDriverInstallationConfig: &container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs{
			GpuDriverVersion: pulumi.String("INSTALLATION_DISABLED"),
		},
	}
	if p.Partition != "" {
		accelerator.GpuPartitionSize = pulumi.String(p.Partition)
	}
	return container.NewNodePool(ctx, name+"-"+p.Name, &container.NodePoolArgs{
		Name:             pulumi.String(p.Name),
		Cluster:          controlPlane.Name,
		Location:         pulumi.String(args.Zone),
		Project:          pulumi.String(args.Project),
		NodeLocations:    pulumi.StringArray{pulumi.String(args.Zone)},
		InitialNodeCount: pulumi.Int(p.Min()),
		Autoscaling:      autoscaling(p.Min(), p.Max()),
		Management:       management(),
		NodeConfig: &container.NodePoolNodeConfigArgs{
			MachineType: pulumi.String(p.MachineType),
			// DriverRoot is where the COS driver installer puts the driver.
			ImageType:              pulumi.String("COS_CONTAINERD"),
			GuestAccelerators:      container.NodePoolNodeConfigGuestAcceleratorArray{accelerator},
			Labels:                 pulumi.ToStringMap(contract.Labels),
			ResourceLabels:         pulumi.ToStringMap(naming.CostLabels(stack, p.Name, contract.Model.Key)),
			WorkloadMetadataConfig: gkeMetadata(),
			KubeletConfig:          kubeletConfig(),
			Taints:                 taints,
		},
	}, pulumi.Parent(parent), ignoreNodeCounts(),
		// The pool's name is fixed and accelerator changes force replacement: the old pool must go first. GPU quota
		// rarely fits both at once anyway.
		pulumi.DeleteBeforeReplace(true),
		// A pool given to a tenant, taken from one or handed to another gets new nodes: a taint changed in place
		// evicts no running pod (NoSchedule) and leaves the nodes' image caches, so the last tenant's pods and images
		// would stay on the new tenant's nodes (docs/threat-model.md, "Shared nodes").
		pulumi.ReplaceOnChanges([]string{"nodeConfig.taints"}))
}

// autoscaling bounds are per zone; the pools have one zone, so they are the pool's bounds.
func autoscaling(minNodes, maxNodes int) *container.NodePoolAutoscalingArgs {
	return &container.NodePoolAutoscalingArgs{MinNodeCount: pulumi.Int(minNodes), MaxNodeCount: pulumi.Int(maxNodes)}
}

func management() *container.NodePoolManagementArgs {
	return &container.NodePoolManagementArgs{AutoRepair: pulumi.Bool(true), AutoUpgrade: pulumi.Bool(true)}
}

// kubeletConfig turns off the kubelet's read-only port (10255), which serves the pods of every tenant on the node
// without authentication to anything that reaches the node's address (docs/threat-model.md, "Cloud identity and node
// services"; https://cloud.google.com/kubernetes-engine/docs/how-to/disable-kubelet-readonly-port).
func kubeletConfig() *container.NodePoolNodeConfigKubeletConfigArgs {
	return &container.NodePoolNodeConfigKubeletConfigArgs{InsecureKubeletReadonlyPortEnabled: pulumi.String("FALSE")}
}

// gkeMetadata serves pods the Workload Identity metadata server, hiding the node's service account from tenants.
func gkeMetadata() *container.NodePoolNodeConfigWorkloadMetadataConfigArgs {
	return &container.NodePoolNodeConfigWorkloadMetadataConfigArgs{Mode: pulumi.String("GKE_METADATA")}
}

// ignoreNodeCounts leaves the node count to the autoscaler; a changed initial count would otherwise replace the pool
// (pulumi/pulumi-gcp#412).
func ignoreNodeCounts() pulumi.ResourceOption {
	return pulumi.IgnoreChanges([]string{"initialNodeCount", "nodeCount"})
}

// kubeconfigTemplate authenticates through gke-gcloud-auth-plugin, as kubectl does since GKE 1.26
// (pulumi/examples gcp-go-gke/main.go).
const kubeconfigTemplate = `apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://%[2]s
    certificate-authority-data: %[3]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s
current-context: %[1]s
users:
- name: %[1]s
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: gke-gcloud-auth-plugin
      installHint: Install gke-gcloud-auth-plugin for use with kubectl by following
        https://cloud.google.com/blog/products/containers-kubernetes/kubectl-auth-changes-in-gke
      provideClusterInfo: true
`

func kubeconfig(args *gke.ClusterArgs, controlPlane *container.Cluster) pulumi.StringOutput {
	// The context name follows gcloud's gke_<project>_<location>_<cluster>.
	contextName := pulumi.Sprintf("gke_%s_%s_%s", args.Project, args.Zone, controlPlane.Name)
	return pulumi.Sprintf(kubeconfigTemplate, contextName, controlPlane.Endpoint,
		controlPlane.MasterAuth.ClusterCaCertificate().Elem())
}
