package pipeline

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
)

// Defaults, as documented in the README's config reference.
const (
	defaultKubernetesVersion = "1.35"
	defaultReleaseChannel    = "REGULAR"
	defaultGKESystemMachine  = "e2-standard-4"
	// UNCONFIRMED that PRO2-S is offered in every Kapsule zone; Scaleway's Kapsule examples use PRO2 and DEV1 types.
	defaultScalewaySystemNodeType = "PRO2-S"
	defaultCNI                    = "cilium"
	defaultMaintenanceDay         = "sunday"
	defaultMaintenanceHour        = 3
	defaultTenantCPUQuota         = "16"
	defaultTenantMemoryQuota      = "64Gi"
	defaultVClusterCPU            = "1"
	defaultVClusterMemory         = "2Gi"
	defaultVClusterStorage        = "5Gi"
)

func intPtr(i int) *int    { return &i }
func boolPtr(b bool) *bool { return &b }

func orDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

func intDefault(p **int, def int) {
	if *p == nil {
		*p = intPtr(def)
	}
}

func applyDefaults(c *Config) {
	g := &c.GKE
	orDefault(&g.KubernetesVersion, defaultKubernetesVersion)
	orDefault(&g.ReleaseChannel, defaultReleaseChannel)
	if g.DeletionProtection == nil {
		g.DeletionProtection = boolPtr(true)
	}
	orDefault(&g.SystemPool.MachineType, defaultGKESystemMachine)
	intDefault(&g.SystemPool.MinNodes, 1)
	intDefault(&g.SystemPool.MaxNodes, 3)

	s := &c.Scaleway
	orDefault(&s.KubernetesVersion, defaultKubernetesVersion)
	orDefault(&s.CNI, defaultCNI)
	if s.AutoUpgrade.Enabled == nil {
		s.AutoUpgrade.Enabled = boolPtr(true)
	}
	orDefault(&s.AutoUpgrade.MaintenanceWindowDay, defaultMaintenanceDay)
	intDefault(&s.AutoUpgrade.MaintenanceWindowStartHour, defaultMaintenanceHour)
	orDefault(&s.SystemPool.NodeType, defaultScalewaySystemNodeType)
	intDefault(&s.SystemPool.MinNodes, 1)
	intDefault(&s.SystemPool.MaxNodes, 3)

	for i := range c.GPUPools {
		p := &c.GPUPools[i]
		intDefault(&p.MinNodes, 0)
		intDefault(&p.MaxNodes, max(1, *p.MinNodes))
	}
	for i := range c.Tenants {
		t := &c.Tenants[i]
		orDefault(&t.CPUQuota, defaultTenantCPUQuota)
		orDefault(&t.MemoryQuota, defaultTenantMemoryQuota)
		orDefault(&t.VCluster.CPU, defaultVClusterCPU)
		orDefault(&t.VCluster.Memory, defaultVClusterMemory)
		orDefault(&t.VCluster.StorageSize, defaultVClusterStorage)
	}
	if c.VCluster.Chart == (helmchart.Chart{}) {
		c.VCluster.Chart = vcluster.DefaultVirtualClusterChart
	}
}
