// Package cluster holds the contract every cluster flavour (GKE, Scaleway, an existing cluster) hands to the
// in-cluster layer: an explicit kubernetes provider, the kubeconfig as a secret, and what its GPU pools offer.
package cluster

import (
	"net/netip"
	"slices"

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

// Flavours are every flavour, as the `cloud` key spells them.
var Flavours = []string{string(GKE), string(Scaleway), string(Existing)}

// GPUPool describes what one GPU node pool offers, so GPU classes can be checked against it and workloads placed on it.
type GPUPool struct {
	Name string
	// Model is the GPU model as the NVIDIA DRA driver publishes it.
	Model GPUModel
	// GPUsPerNode is the number of physical GPUs on each node.
	GPUsPerNode int
	// MIGProfile is the MIG profile the GPUs are partitioned into, or "" for whole GPUs.
	MIGProfile string
	// MaxNodes is how many nodes the pool may scale to.
	MaxNodes int
	// Labels are the node labels the pool's nodes carry.
	Labels map[string]string
	// Taint keeps workloads without a matching toleration off the pool.
	Taint Taint
	// Tenant is the one tenant whose pods the pool runs, "" when every tenant shares it (PoolSpec.Tenant).
	Tenant string
}

// Dedicated are the tenants with pools of their own among pools (PoolSpec.Tenant).
func Dedicated(pools []GPUPool) map[string]bool {
	out := map[string]bool{}
	for _, p := range pools {
		if p.Tenant != "" {
			out[p.Tenant] = true
		}
	}
	return out
}

// Taints are every taint the pool's nodes carry: Taint, and the dedicated taint of its tenant.
func (p GPUPool) Taints() []Taint {
	out := []Taint{p.Taint}
	if p.Tenant != "" {
		out = append(out, DedicatedTaint(p.Tenant))
	}
	return out
}

// Cluster is the contract every flavour returns.
type Cluster struct {
	Flavour Flavour
	// Provider is the explicit kubernetes provider for everything inside the cluster.
	Provider *kubernetes.Provider
	// Kubeconfig is always a secret.
	Kubeconfig pulumi.StringOutput
	GPUPools   []GPUPool
	// DriverRoot is where the NVIDIA driver lives on the GPU nodes, as the DRA driver's nvidiaDriverRoot wants it.
	DriverRoot string
	// PlatformPool is whether the system pool is the platform's own (PlatformPoolTaint): the platform's pods then go
	// there (PlatformPlacement) and the tenants' elsewhere.
	PlatformPool bool
	// PodCIDRs are the ranges the cluster gives its pods addresses from, where the stack knows them; every tenant's
	// egress to the internet excludes them (tenancy.NetworkArgs.PodCIDRs). Empty where the network plugin's ipBlock
	// never matches a pod (Cilium: GKE's Dataplane V2, Kapsule's default) or the operator has not said.
	PodCIDRs []string
	// ClaimStatusWriters are the users that allocate, reserve and release ResourceClaims on this cluster: its
	// scheduler and resource-claim controller. No one else may write a claim's allocation.
	ClaimStatusWriters []string
	// Owner is the naming.StackLabel value of the stack that manages the cluster's objects; the caller sets it.
	Owner string
	// Timeouts bound the deletion waits of in-cluster objects; the caller sets them.
	Timeouts Timeouts
	// Anchor is the cloud resource whose deletion removes every in-cluster object with it; nil for an existing cluster.
	Anchor pulumi.Resource
}

// ServiceRanges are a cloud's Service address ranges for the clusters the program makes: the cloud's own default, which
// a cluster made without a range of its own has, and the widest range the program derives when tenants need more.
type ServiceRanges struct {
	Default, Widest netip.Prefix
}

// ServiceRange is the Service address range a cloud cluster is made with; the cloud cannot change it afterwards, so a
// new range replaces the cluster.
type ServiceRange struct {
	// CIDR is the range; "" keeps the cloud's default.
	CIDR string
	// Protect refuses a plan that replaces the cluster's control plane (a changed range does): set while the cluster
	// holds tenants, unless the operator confirmed the replacement. The engine refuses to replace a resource that
	// is protected before and after (pulumi/pulumi pkg/resource/deploy/step_generator.go generateStepsFromDiff, "unable to replace resource").
	Protect bool
}

// ResourceOptions are the options an in-cluster component or resource takes: the cluster's provider (inherited by
// children); when a cloud cluster exists, DeletedWith it, so destroying the cluster does not wait on per-object
// deletes against an API that is going away; and, when Owner is set, the owner's label and ForceApplyAnnotation on
// every object; and Timeouts on every namespace's deletion. Children do not inherit DeletedWith, and labels and
// timeouts are per object, so a transformation, which children do inherit, sets them. The objects of a helm/v4 Chart
// are registered by the provider, where only a transform reaches them: it sets their labels, but cannot give them
// DeletedWith, which the Go SDK's transform callback does not send back (pulumi sdk v3.274.1 go/pulumi/context.go,
// the TransformResourceOptions it returns); a cloud cluster's destroy deletes them object by object first.
func (c *Cluster) ResourceOptions() []pulumi.ResourceOption {
	opts := []pulumi.ResourceOption{pulumi.Provider(c.Provider)}
	if c.Anchor != nil {
		opts = append(opts, pulumi.DeletedWith(c.Anchor))
	}
	anchor, owner, namespaceDeletion := c.Anchor, c.Owner, c.Timeouts.namespaceDeletion()
	if owner != "" {
		opts = append(opts, pulumi.Transforms([]pulumi.ResourceTransform{ownedTransform(owner)}))
	}
	// Transformations run in the program itself, so previews, mocks and the engine all see the option.
	return append(opts, pulumi.Transformations([]pulumi.ResourceTransformation{
		func(args *pulumi.ResourceTransformationArgs) *pulumi.ResourceTransformationResult {
			if _, custom := args.Resource.(pulumi.CustomResource); !custom {
				return nil
			}
			result := &pulumi.ResourceTransformationResult{Props: args.Props, Opts: args.Opts}
			if args.Type == namespaceType {
				result.Opts = append(result.Opts, pulumi.Timeouts(&pulumi.CustomTimeouts{Delete: namespaceDeletion}))
			}
			if anchor != nil {
				result.Opts = append(result.Opts, pulumi.DeletedWith(anchor))
			}
			if owner != "" {
				result.Props = owned(args.Props, owner).(pulumi.Input)
			}
			return result
		},
	}))
}

// StandardClaimStatusWriters are those users on a control plane that runs its components under their standard
// identities: the scheduler as system:kube-scheduler, the controller-manager's resource-claim controller as its own
// service account with --use-service-account-credentials, or as system:kube-controller-manager without it
// (kubernetes v1.34.4 plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go ClusterRoleBinding
// system:kube-scheduler, controller_policy.go resource-claim-controller; cmd/kube-controller-manager/app/core.go).
var StandardClaimStatusWriters = []string{
	"system:kube-scheduler",
	"system:serviceaccount:kube-system:resource-claim-controller",
	"system:kube-controller-manager",
}

// GPUTaints are the distinct taints of the GPU pools, in pool order: what GPU workloads must tolerate. A dedicated
// pool's taint is not among them: only its tenant's pods tolerate it (GPUPool.Taints).
func (c *Cluster) GPUTaints() []Taint { return DistinctTaints(c.GPUPools) }

// DistinctTaints lists the pools' taints once each, in pool order.
func DistinctTaints(pools []GPUPool) []Taint {
	var out []Taint
	for _, p := range pools {
		if p.Taint.Key != "" && !slices.Contains(out, p.Taint) {
			out = append(out, p.Taint)
		}
	}
	return out
}
