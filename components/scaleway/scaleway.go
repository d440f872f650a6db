// Package scaleway describes a Kapsule cluster for DRA-managed GPUs: its args, their defaults and rules, what its GPU
// pools offer and the tags it carries. Package kapsule builds it (its private network, the cluster (Cilium), a system
// pool and one pool per GPU pool, plus the kubernetes provider that reaches it) with the pulumi-scaleway SDK, which
// only a program that imports that package links; this one stays free of it, so that the Platform can decode and
// check a Scaleway config anywhere.
package scaleway

import (
	"net/netip"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
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
	// TenantPool, when set, is a pool for the tenants' pods that need no GPU, and makes the system pool the
	// platform's own (cluster.PlatformPoolTaint); unset, tenants' pods share the system pool with the platform.
	TenantPool *SystemPoolArgs `json:"tenantPool"`
	GPUPools   []GPUPoolSpec   `json:"-"`
	// ServiceRange is the cluster's Service range (Kapsule's serviceCidr), which the Platform sizes for its tenants.
	ServiceRange cluster.ServiceRange `json:"-"`
}

// ServiceRanges: Kapsule's default serviceCidr, which the provider writes into a cluster made without one
// (scaleway/terraform-provider-scaleway v2.79.0, which pulumi-scaleway v1.53.0 builds on,
// internal/services/k8s/cluster.go NetworkingDefaultValues: pod_cidr 100.64.0.0/15, service_cidr 10.32.0.0/20), and
// the widest the program derives, from the same address, clear of the pod range.
var ServiceRanges = cluster.ServiceRanges{
	Default: netip.MustParsePrefix("10.32.0.0/20"),
	Widest:  netip.MustParsePrefix("10.32.0.0/16"),
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

// IsEnabled says whether auto-upgrade is on, as it is when unset; validation and the cluster both read it here.
func (u AutoUpgradeArgs) IsEnabled() bool { return u.Enabled == nil || *u.Enabled }

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

// SystemPoolArgs size a pool without GPUs, the system pool or the tenant pool; empty fields take PRO2-S, 1 and 3.
type SystemPoolArgs struct {
	NodeType string `json:"nodeType"`
	cluster.NodeBounds
}

// NodeTypeOrDefault is the pool's node type, PRO2-S when empty; the default lives here so that the cluster and the
// config's documentation agree.
func (s SystemPoolArgs) NodeTypeOrDefault() string {
	if s.NodeType == "" {
		// UNCONFIRMED that PRO2-S is offered in every Kapsule zone; Scaleway's Kapsule examples use PRO2 and DEV1 types.
		return "PRO2-S"
	}
	return s.NodeType
}

// Bounds are the pool's minimum and maximum node counts, 1 and 3 when unset; validation and the cluster both read
// them here, so what is checked is what is built.
func (s SystemPoolArgs) Bounds() (int, int) { return s.Or(1, 3) }

// PlatformPool is whether the system pool is the platform's own: when the tenants have a pool of their own.
func (a ClusterArgs) PlatformPool() bool { return a.TenantPool != nil }

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
