// Package gke describes a zonal GKE cluster for DRA-managed GPUs: its args, their defaults and rules, and what its GPU
// pools offer. Package gkecluster builds it (the control plane, a small system pool and one node pool per GPU pool,
// plus the kubernetes provider that reaches it) with the pulumi-gcp SDK, which only a program that imports that
// package links; this one stays free of it, so that the Platform can decode and check a GKE config anywhere.
package gke

import (
	"net/netip"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
)

// ClusterArgs describe the cluster; a stack's `gke` block decodes into it and its `gpuPools` into GPUPools.
type ClusterArgs struct {
	Project string `json:"project"`
	// Zone is where the control plane and every pool live; GPU models exist only in some zones.
	Zone string `json:"zone"`
	// KubernetesVersion is a minor version such as "1.35" (GKE picks its newest patch); "" leaves it to GKE.
	KubernetesVersion string `json:"kubernetesVersion"`
	// ReleaseChannel is one of ReleaseChannels; "" leaves GKE's default.
	ReleaseChannel string `json:"releaseChannel"`
	// DeletionProtection defaults to true, as GKE's own API does.
	DeletionProtection *bool `json:"deletionProtection"`
	// AllowUnlistedZone accepts a zone the accelerator table does not list for a pool's accelerator.
	AllowUnlistedZone bool           `json:"allowUnlistedZone"`
	SystemPool        SystemPoolArgs `json:"systemPool"`
	// TenantPool, when set, is a pool for the tenants' pods that need no GPU, and makes the system pool the
	// platform's own (cluster.PlatformPoolTaint); unset, tenants' pods share the system pool with the platform.
	TenantPool *SystemPoolArgs `json:"tenantPool"`
	GPUPools   []GPUPoolSpec   `json:"-"`
	// ServiceRange is the cluster's Service range (ipAllocationPolicy.servicesIpv4CidrBlock), which the Platform sizes
	// for its tenants.
	ServiceRange cluster.ServiceRange `json:"-"`
}

// ServiceRanges: the range GKE gives Services of a Standard cluster made at 1.29 or later without one of its own
// ("GKE assigns IP addresses for GKE Services from a GKE-managed range: 34.118.224.0/20 by default",
// https://cloud.google.com/kubernetes-engine/docs/concepts/alias-ips#cluster_sizing), and the widest the program
// derives, at kubeadm's usual Service address, outside the ranges of an auto-mode VPC's subnets (10.128.0.0/9).
var ServiceRanges = cluster.ServiceRanges{
	Default: netip.MustParsePrefix("34.118.224.0/20"),
	Widest:  netip.MustParsePrefix("10.96.0.0/16"),
}

// SystemPoolArgs size an autoscaled pool without GPUs, the system pool or the tenant pool; empty fields take
// e2-standard-4, 1 and 3.
type SystemPoolArgs struct {
	MachineType string `json:"machineType"`
	cluster.NodeBounds
}

// MachineTypeOrDefault is the pool's machine type, e2-standard-4 when empty; the default lives here so that the
// cluster and the config's documentation agree.
func (s SystemPoolArgs) MachineTypeOrDefault() string {
	if s.MachineType == "" {
		return "e2-standard-4"
	}
	return s.MachineType
}

// Bounds are the pool's minimum and maximum node counts, 1 and 3 when unset; validation and the cluster both read
// them here, so what is checked is what is built.
func (s SystemPoolArgs) Bounds() (int, int) { return s.Or(1, 3) }

// PlatformPool is whether the system pool is the platform's own: when the tenants have a pool of their own.
func (a ClusterArgs) PlatformPool() bool { return a.TenantPool != nil }

// Config defaults the README documents for a stack's `gke` block; the cluster itself (gkecluster.NewCluster) leaves
// an unset version and channel to GKE.
const (
	DefaultKubernetesVersion = "1.35"
	DefaultReleaseChannel    = "REGULAR"
)

// WithDefaults returns the args with the stack config's defaults filled in.
func (a ClusterArgs) WithDefaults() ClusterArgs {
	if a.KubernetesVersion == "" {
		a.KubernetesVersion = DefaultKubernetesVersion
	}
	if a.ReleaseChannel == "" {
		a.ReleaseChannel = DefaultReleaseChannel
	}
	if a.DeletionProtection == nil {
		a.DeletionProtection = ptr(true)
	}
	return a
}

func ptr[T any](v T) *T { return &v }
