package scaleway

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CNIs are the CNIs Kapsule offers (scaleway/docs-content pages/kubernetes/reference-content/version-support-policy.mdx).
var CNIs = []string{"cilium", "calico"}

// MaintenanceDays are the days an auto-upgrade maintenance window may start on.
var MaintenanceDays = []string{"any", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"}

// VersionCheck checks the cluster's Kubernetes version (the cluster's block at path) against Kapsule's support table
// on day now.
func (a *ClusterArgs) VersionCheck(path *field.Path, now time.Time) cluster.VersionCheck {
	minorOnly := ""
	if a.AutoUpgrade.IsEnabled() {
		minorOnly = fmt.Sprintf("while %s is true", path.Child("autoUpgrade", "enabled"))
	}
	return SupportedVersions.CheckKubernetesVersion(path.Child("kubernetesVersion"), a.KubernetesVersion, minorOnly, now)
}

// Validate checks the cluster (at path) and its GPU pools (at poolsPath) against Kapsule's rules and the node-type
// table; it is the single owner of these rules, for the stack config and for kapsule.NewCluster alike.
func (a *ClusterArgs) Validate(path, poolsPath *field.Path, now time.Time) field.ErrorList {
	var errs field.ErrorList
	zoneOK := false
	switch {
	case a.Zone == "":
		errs = append(errs, field.Required(path.Child("zone"), "a zone such as fr-par-2 (GPU types: fr-par-2, pl-waw-2)"))
	case !slices.Contains(Zones, a.Zone):
		errs = append(errs, field.NotSupported(path.Child("zone"), a.Zone, Zones))
	default:
		zoneOK = true
	}
	errs = append(errs, a.VersionCheck(path, now).Errs...)
	if e := fieldcheck.OneOf(path.Child("cni"), a.CNI, CNIs); e != nil {
		errs = append(errs, e)
	}
	if d := a.AutoUpgrade.MaintenanceWindowDay; d != "" && !slices.Contains(MaintenanceDays, d) {
		errs = append(errs, field.NotSupported(path.Child("autoUpgrade", "maintenanceWindowDay"), d, MaintenanceDays))
	}
	if h := a.AutoUpgrade.MaintenanceWindowStartHour; h != nil && (*h < 0 || *h > 23) {
		errs = append(errs, field.Invalid(path.Child("autoUpgrade", "maintenanceWindowStartHour"), *h, "must be an hour from 0 to 23"))
	}
	sysMin, sysMax := a.SystemPool.Bounds()
	errs = append(errs, cluster.ValidateNodeBounds(path.Child("systemPool"), sysMin, sysMax)...)
	if a.TenantPool != nil {
		tenMin, tenMax := a.TenantPool.Bounds()
		errs = append(errs, cluster.ValidateNodeBounds(path.Child("tenantPool"), tenMin, tenMax)...)
	}

	names := make([]string, len(a.GPUPools))
	for i, pool := range a.GPUPools {
		pp := poolsPath.Index(i)
		names[i] = pool.Name
		errs = append(errs, pool.PoolSpec.Validate(pp)...)
		errs = append(errs, validateTagValue(pp.Child("name"), naming.CostPoolKey, pool.Name)...)
		nt, ok := nodeTypes[pool.NodeType]
		if !ok {
			errs = append(errs, fieldcheck.OneOf(pp.Child("nodeType"), pool.NodeType, NodeTypes()))
			continue
		}
		errs = append(errs, validateTagValue(pp.Child("nodeType"), naming.CostGPUModelKey, nt.model.Key)...)
		if zoneOK && !a.AllowUnlistedZone {
			errs = append(errs, cluster.ValidateZoneOffers(pp.Child("nodeType"), pool.NodeType, nt.zones, a.Zone, path)...)
		}
		errs = append(errs, cluster.ValidatePartition(pp.Child("partition"), pool.Partition, nt.model)...)
	}
	return append(errs, fieldcheck.UniqueNames(poolsPath, names)...)
}

// NodeTypes are the node types a GPU pool may name: the ones the node-type table knows.
func NodeTypes() []string { return slices.Sorted(maps.Keys(nodeTypes)) }
