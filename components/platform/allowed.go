package platform

import (
	"maps"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
)

// AllowedValues are the keys whose values come from a fixed list, by key path as the schema spells it (a list's items
// as `tenants[].gpuAccess`, a map's keys as `tenants[].objectQuota.<>`), each with the list its validation checks
// against, so that the generated config reference (docs/config-reference.md) says what the validation allows.
func AllowedValues() map[string][]string {
	return map[string][]string{
		keyCloud:             Clouds,
		"gke.releaseChannel": gke.ReleaseChannels,
		"scaleway.zone":      scaleway.Zones,
		"scaleway.cni":       scaleway.CNIs,
		"scaleway.autoUpgrade.maintenanceWindowDay": scaleway.MaintenanceDays,
		"gpuPools[].model":                          cluster.ModelKeys(),
		"gpuPools[].accelerator":                    gke.Accelerators(),
		"gpuPools[].nodeType":                       scaleway.NodeTypes(),
		"gpuClasses[].device":                       tenancy.DeviceKinds,
		"tenants[].podSecurity":                     naming.TenantPodSecurityLevels,
		"tenants[].gpuAccess":                       vcluster.GPUAccessModes,
		"vcluster.gpuAccess":                        vcluster.GPUAccessModes,
		"tenants[].objectQuota.<>":                  slices.Sorted(maps.Keys(tenancy.ObjectQuotaKeys)),
		"ownership.adopt[]":                         sortedKeys(ownedKinds),
	}
}
