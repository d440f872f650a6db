// Package cluster holds the contract every cluster flavour (GKE, Scaleway, an existing cluster) hands to the
// in-cluster layer: an explicit kubernetes provider, the kubeconfig as a secret, and what its GPU pools offer.
package cluster

import (
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Flavour names where the cluster comes from; it selects per-cloud settings such as the DRA driver root.
type Flavour string

const (
	GKE      Flavour = "gke"
	Scaleway Flavour = "scaleway"
	Existing Flavour = "existing"
)

// Taint is a node taint in Kubernetes casing (NoSchedule), as pods must tolerate it.
type Taint struct {
	Key    string
	Value  string
	Effect string
}

// GPUPool describes what one GPU node pool offers, so GPU classes can be checked against it and workloads placed on it.
type GPUPool struct {
	Name string
	// Model is the GPU model as the NVIDIA DRA driver publishes it.
	Model GPUModel
	// GPUsPerNode is the number of physical GPUs on each node.
	GPUsPerNode int
	// MIGProfile is the MIG profile the GPUs are partitioned into, or "" for whole GPUs.
	MIGProfile string
	// Labels are the node labels the pool's nodes carry.
	Labels map[string]string
	// Taint keeps workloads without a matching toleration off the pool.
	Taint Taint
}

// Cluster is the contract every flavour returns.
type Cluster struct {
	Flavour Flavour
	// Provider is the explicit kubernetes provider for everything inside the cluster.
	Provider *kubernetes.Provider
	// Kubeconfig is always a secret.
	Kubeconfig pulumi.StringOutput
	GPUPools   []GPUPool
	// Anchor is the cloud resource whose deletion removes every in-cluster object with it; nil for an existing cluster.
	Anchor pulumi.Resource
}

// ResourceOptions are the options an in-cluster component or resource takes: the cluster's provider (inherited by
// children) and, when a cloud cluster exists, DeletedWith it, so destroying the cluster does not wait on per-object
// deletes against an API that is going away. Children do not inherit DeletedWith, so a transform sets it on every
// resource beneath.
func (c *Cluster) ResourceOptions() []pulumi.ResourceOption {
	opts := []pulumi.ResourceOption{pulumi.Provider(c.Provider)}
	if c.Anchor != nil {
		anchor := c.Anchor
		// Transformations run in the program itself, so previews, mocks and the engine all see the option.
		opts = append(opts, pulumi.DeletedWith(anchor), pulumi.Transformations([]pulumi.ResourceTransformation{
			func(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
				if _, custom := args.Resource.(pulumi.CustomResource); !custom {
					return nil
				}
				return &pulumi.ResourceTransformationResult{
					Props: args.Props, Opts: append(args.Opts, pulumi.DeletedWith(anchor)),
				}
			},
		}))
	}
	return opts
}
