package cluster

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NewProvider builds the explicit kubernetes provider a flavour hands on. The kubeconfig is forced secret.
// clusterIdentifier, when set, makes the provider replaced only when the cluster itself changes, so a rotated token
// or certificate in the kubeconfig updates the provider instead of replacing every in-cluster object
// (pulumi-kubernetes provider argument clusterIdentifier, https://www.pulumi.com/registry/packages/kubernetes/api-docs/provider/).
func NewProvider(ctx *pulumi.Context, name string, kubeconfig pulumi.StringInput, clusterIdentifier pulumi.StringPtrInput,
	opts ...pulumi.ResourceOption) (*kubernetes.Provider, error) {
	return kubernetes.NewProvider(ctx, name, &kubernetes.ProviderArgs{
		Kubeconfig:        pulumi.ToSecret(kubeconfig).(pulumi.StringOutput),
		ClusterIdentifier: clusterIdentifier,
		// Explicit, so an ambient PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY cannot change how objects are applied.
		EnableServerSideApply: pulumi.Bool(true),
	}, opts...)
}

// ExistingArgs describe a cluster created outside this program. The stack's `existing` block decodes into it; the
// kubeconfig itself and the pools are filled in by the caller.
type ExistingArgs struct {
	// KubeconfigPath names a kubeconfig file (the caller reads it into Kubeconfig).
	KubeconfigPath string `json:"kubeconfigPath"`
	// DriverRoot is where the NVIDIA driver lives on the nodes; empty means the host root, "/".
	DriverRoot string `json:"driverRoot"`
	// PlatformPool says the operator has labelled and tainted nodes for the platform alone (PlatformPoolLabels,
	// PlatformPoolTaint), and that the tenants' pods that need no GPU have untainted nodes of their own: the
	// platform's pods go to the former (Cluster.PlatformPool).
	PlatformPool bool `json:"platformPool"`
	// PodCIDRs are the ranges the cluster gives its pods addresses from (Cluster.PodCIDRs).
	PodCIDRs []string `json:"podCIDRs"`
	// Kubeconfig reaches the cluster; it is stored as a secret whether or not it arrives as one.
	Kubeconfig pulumi.StringInput `json:"-"`
	// ClusterIdentifier is the cluster's identity when known (the caller reads it), so that a new address or CA in
	// the kubeconfig updates the provider instead of replacing every object (NewProvider).
	ClusterIdentifier string `json:"-"`
	// GPUPools are the GPU node pools the cluster already has, labelled and tainted as ExistingPoolContract says.
	GPUPools []ExistingPoolSpec `json:"-"`
}

// HostDriverRoot is where a driver installed on the host itself lives (dra-driver-nvidia-gpu v0.4.0 values.yaml
// nvidiaDriverRoot default).
const HostDriverRoot = "/"

// ExistingPoolSpec describes one GPU pool of an existing cluster, as a stack's `gpuPools[]` entry spells it.
type ExistingPoolSpec struct {
	PoolSpec
	// Model is a GPUModel key such as a100-40gb.
	Model string `json:"model"`
	// GPUsPerNode defaults to 1.
	GPUsPerNode int `json:"gpusPerNode"`
}

// ExistingPoolContract describes what an existing pool offers; false when its model is unknown.
func ExistingPoolContract(p ExistingPoolSpec) (GPUPool, bool) {
	m, ok := ModelByKey(p.Model)
	if !ok {
		return GPUPool{}, false
	}
	return p.Dedicate(GPUPool{
		Name: p.Name, Model: m, GPUsPerNode: max(1, p.GPUsPerNode), MIGProfile: p.Partition, MaxNodes: p.Max(),
		Labels: GPUNodeLabels(p.Name), Taint: GPUTaint,
	}), true
}

// Validate checks the block's own keys (at path) and the pools (at poolsPath); the kubeconfig is the caller's to
// check, since it may come from a secret rather than KubeconfigPath.
func (a *ExistingArgs) Validate(path, poolsPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range a.PodCIDRs {
		errs = append(errs, fieldcheck.NarrowCIDR(path.Child("podCIDRs").Index(i), c,
			"would take every address for the pods' and so block all of the tenants' egress")...)
	}
	names := make([]string, len(a.GPUPools))
	for i, pool := range a.GPUPools {
		pp := poolsPath.Index(i)
		names[i] = pool.Name
		errs = append(errs, pool.PoolSpec.Validate(pp)...)
		model, ok := ModelByKey(pool.Model)
		if !ok {
			errs = append(errs, fieldcheck.OneOf(pp.Child("model"), pool.Model, ModelKeys()))
			continue
		}
		if pool.GPUsPerNode < 0 {
			errs = append(errs, field.Invalid(pp.Child("gpusPerNode"), pool.GPUsPerNode, "must be 1 or more (default 1)"))
		}
		errs = append(errs, ValidatePartition(pp.Child("partition"), pool.Partition, model)...)
	}
	return append(errs, fieldcheck.UniqueNames(poolsPath, names)...)
}

// ExistingCluster is a cluster this program does not manage: only the kubernetes provider that reaches it. (The
// name Existing is taken by the Flavour constant.)
type ExistingCluster struct {
	pulumi.ResourceState

	Provider   *kubernetes.Provider
	Kubeconfig pulumi.StringOutput

	gpuPools     []GPUPool
	driverRoot   string
	platformPool bool
	podCIDRs     []string
}

// NewExisting wraps an existing cluster in the cluster contract.
func NewExisting(ctx *pulumi.Context, name string, args *ExistingArgs, opts ...pulumi.ResourceOption) (*ExistingCluster, error) {
	if args == nil {
		return nil, errors.New("existing cluster: args are required")
	}
	if args.Kubeconfig == nil {
		return nil, errors.New("existing cluster: a kubeconfig is required")
	}
	if errs := args.Validate(field.NewPath("existing"), field.NewPath("gpuPools")); len(errs) > 0 {
		return nil, fmt.Errorf("existing cluster %q: %w", name, errs.ToAggregate())
	}
	comp := &ExistingCluster{driverRoot: args.DriverRoot, platformPool: args.PlatformPool, podCIDRs: slices.Clone(args.PodCIDRs)}
	if comp.driverRoot == "" {
		comp.driverRoot = HostDriverRoot
	}
	for _, p := range args.GPUPools {
		contract, _ := ExistingPoolContract(p)
		comp.gpuPools = append(comp.gpuPools, contract)
	}
	var err error
	comp.Provider, comp.Kubeconfig, err = registerReached(ctx, "gpu-tenancy:cluster:Existing", "existing", name, comp, args.Kubeconfig,
		args.ClusterIdentifier, opts)
	if err != nil {
		return nil, err
	}
	return comp, nil
}

// registerReached registers a component for a cluster this stack does not create, reached by a kubeconfig: the
// component, its kubernetes provider and its kubeconfig output (kept secret).
func registerReached(ctx *pulumi.Context, typ, what, name string, comp pulumi.ComponentResource, kubeconfig pulumi.StringInput,
	identity string, opts []pulumi.ResourceOption) (*kubernetes.Provider, pulumi.StringOutput, error) {
	if err := ctx.RegisterComponentResource(typ, name, comp, opts...); err != nil {
		return nil, pulumi.StringOutput{}, fmt.Errorf("registering %s cluster %q: %w", what, name, err)
	}
	secret := pulumi.ToSecret(kubeconfig).(pulumi.StringOutput)
	var clusterIdentifier pulumi.StringPtrInput
	if identity != "" {
		clusterIdentifier = pulumi.StringPtr(identity)
	}
	provider, err := NewProvider(ctx, name, secret, clusterIdentifier, pulumi.Parent(comp))
	if err != nil {
		return nil, pulumi.StringOutput{}, fmt.Errorf("creating kubernetes provider for %s cluster %q: %w", what, name, err)
	}
	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{"kubeconfig": secret}); err != nil {
		return nil, pulumi.StringOutput{}, fmt.Errorf("registering outputs of %s cluster %q: %w", what, name, err)
	}
	return provider, secret, nil
}

// Contract returns the cluster contract; an existing cluster has no Anchor, so in-cluster objects are deleted one by one.
func (e *ExistingCluster) Contract() *Cluster {
	return &Cluster{
		Flavour:            Existing,
		Provider:           e.Provider,
		Kubeconfig:         e.Kubeconfig,
		GPUPools:           append([]GPUPool(nil), e.gpuPools...),
		DriverRoot:         e.driverRoot,
		PlatformPool:       e.platformPool,
		PodCIDRs:           slices.Clone(e.podCIDRs),
		ClaimStatusWriters: slices.Clone(StandardClaimStatusWriters),
	}
}
