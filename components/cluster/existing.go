package cluster

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// NewProvider builds the explicit kubernetes provider a flavour hands on. The kubeconfig is forced secret.
// clusterIdentifier, when set, makes the provider replaced only when the cluster itself changes, so a rotated token
// or certificate in the kubeconfig updates the provider instead of replacing every in-cluster object
// (pulumi-anchors.md 2.4).
func NewProvider(ctx *pulumi.Context, name string, kubeconfig pulumi.StringInput, clusterIdentifier pulumi.StringPtrInput,
	opts ...pulumi.ResourceOption) (*kubernetes.Provider, error) {
	return kubernetes.NewProvider(ctx, name, &kubernetes.ProviderArgs{
		Kubeconfig:        pulumi.ToSecret(kubeconfig).(pulumi.StringOutput),
		ClusterIdentifier: clusterIdentifier,
		// Explicit, so an ambient PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY cannot change how objects are applied.
		EnableServerSideApply: pulumi.Bool(true),
	}, opts...)
}

// ExistingArgs describe a cluster created outside this program.
type ExistingArgs struct {
	// Kubeconfig reaches the cluster; it is stored as a secret whether or not it arrives as one.
	Kubeconfig pulumi.StringInput
	// GPUPools are the GPU node pools the cluster already has, labelled and tainted as described.
	GPUPools []GPUPool
}

// ExistingCluster is a cluster this program does not manage: only the kubernetes provider that reaches it. (The
// name Existing is taken by the Flavour constant.)
type ExistingCluster struct {
	pulumi.ResourceState

	Provider   *kubernetes.Provider
	Kubeconfig pulumi.StringOutput

	gpuPools []GPUPool
}

// NewExisting wraps an existing cluster in the cluster contract.
func NewExisting(ctx *pulumi.Context, name string, args *ExistingArgs, opts ...pulumi.ResourceOption) (*ExistingCluster, error) {
	if args == nil {
		return nil, errors.New("existing cluster: args are required")
	}
	if args.Kubeconfig == nil {
		return nil, errors.New("existing cluster: a kubeconfig is required")
	}
	comp := &ExistingCluster{gpuPools: append([]GPUPool(nil), args.GPUPools...)}
	if err := ctx.RegisterComponentResource("gpu-tenancy:cluster:Existing", name, comp, opts...); err != nil {
		return nil, fmt.Errorf("registering existing cluster %q: %w", name, err)
	}
	comp.Kubeconfig = pulumi.ToSecret(args.Kubeconfig).(pulumi.StringOutput)
	provider, err := NewProvider(ctx, name, comp.Kubeconfig, nil, pulumi.Parent(comp))
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes provider for existing cluster %q: %w", name, err)
	}
	comp.Provider = provider
	if err := ctx.RegisterResourceOutputs(comp, pulumi.Map{"kubeconfig": comp.Kubeconfig}); err != nil {
		return nil, fmt.Errorf("registering outputs of existing cluster %q: %w", name, err)
	}
	return comp, nil
}

// Contract returns the cluster contract; an existing cluster has no Anchor, so in-cluster objects are deleted one by one.
func (e *ExistingCluster) Contract() *Cluster {
	return &Cluster{
		Flavour:    Existing,
		Provider:   e.Provider,
		Kubeconfig: e.Kubeconfig,
		GPUPools:   append([]GPUPool(nil), e.gpuPools...),
	}
}
