package cluster

import (
	"errors"
	"slices"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ReferencedArgs are a cluster that another stack manages, as a stack that only adds objects to it sees it: a tenant
// group's stack of an environment split into tenant groups, whose platform stack owns the cluster.
type ReferencedArgs struct {
	Flavour Flavour
	// Kubeconfig reaches the cluster: the platform stack's output, or an existing cluster's own.
	Kubeconfig pulumi.StringInput
	// ClusterIdentifier is the cluster's identity when known (NewProvider).
	ClusterIdentifier string
	// GPUPools are the pools' contracts, as the platform stack's cluster offers them.
	GPUPools   []GPUPool
	DriverRoot string
}

// ReferencedCluster is the kubernetes provider of a cluster another stack manages.
type ReferencedCluster struct {
	pulumi.ResourceState

	Provider   *kubernetes.Provider
	Kubeconfig pulumi.StringOutput
	args       ReferencedArgs
}

// NewReferenced wraps a cluster another stack manages in the cluster contract. It has no Anchor: this stack's objects
// are deleted one by one, before the platform stack's destroy removes the cluster.
func NewReferenced(ctx *pulumi.Context, name string, args *ReferencedArgs, opts ...pulumi.ResourceOption) (*ReferencedCluster, error) {
	if args == nil || args.Kubeconfig == nil {
		return nil, errors.New("referenced cluster: a kubeconfig is required")
	}
	comp := &ReferencedCluster{args: *args}
	var err error
	comp.Provider, comp.Kubeconfig, err = registerReached(ctx, "gpu-tenancy:cluster:Referenced", "referenced", name, comp, args.Kubeconfig,
		args.ClusterIdentifier, opts)
	if err != nil {
		return nil, err
	}
	return comp, nil
}

// Contract returns the cluster contract.
func (r *ReferencedCluster) Contract() *Cluster {
	return &Cluster{
		Flavour:            r.args.Flavour,
		Provider:           r.Provider,
		Kubeconfig:         r.Kubeconfig,
		GPUPools:           slices.Clone(r.args.GPUPools),
		DriverRoot:         r.args.DriverRoot,
		ClaimStatusWriters: slices.Clone(StandardClaimStatusWriters),
	}
}
