package pipeline

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
)

// Namespace is the stack config namespace: every key is `gpu-tenancy:<key>`.
const Namespace = "gpu-tenancy"

// Top-level config keys. Keys holding secrets are read only as Pulumi secrets.
const (
	keyCloud         = "cloud"
	keyGKE           = "gke"
	keyScaleway      = "scaleway"
	keyExisting      = "existing"
	keyKubeconfig    = "kubeconfig"
	keyGPUPools      = "gpuPools"
	keyGPUClasses    = "gpuClasses"
	keyTenants       = "tenants"
	keyDRADriver     = "draDriver"
	keyPlatform      = "platform"
	keyVCluster      = "vcluster"
	keyAdmission     = "admission"
	keyMonitoring    = "monitoring"
	keyOwnership     = "ownership"
	keyTimeouts      = "timeouts"
	keyPrices        = "prices"
	keyAdminPassword = "platformAdminPassword"
	keyLicenseToken  = "platformLicenseToken"
	keyAccessKey     = "platformAccessKey"
	keyAccessKeys    = "platformAccessKeys"
)

var knownKeys = []string{keyCloud, keyGKE, keyScaleway, keyExisting, keyKubeconfig, keyGPUPools, keyGPUClasses,
	keyTenants, keyDRADriver, keyPlatform, keyVCluster, keyAdmission, keyMonitoring, keyOwnership, keyTimeouts, keyPrices, keyAdminPassword, keyLicenseToken, keyAccessKey, keyAccessKeys}

// Clouds are the values of `gpu-tenancy:cloud`.
var Clouds = []string{string(cluster.GKE), string(cluster.Scaleway), string(cluster.Existing)}

// Config is the whole stack config after defaults, parsed and validated. Each block decodes straight into the spec
// of the component that uses it; `gpuPools` decodes into the chosen cloud's pool specs.
type Config struct {
	Cloud      cluster.Flavour
	GKE        gke.ClusterArgs
	Scaleway   scaleway.ClusterArgs
	Existing   cluster.ExistingArgs
	GPUClasses []tenancy.GPUClass
	Tenants    []TenantConfig
	DRADriver  DRADriverConfig
	Platform   PlatformConfig
	VCluster   vcluster.Settings
	Admission  tenancy.AdmissionArgs
	Monitoring monitoring.Spec
	Ownership  OwnershipConfig
	Timeouts   cluster.Timeouts
	Prices     rules.Prices
	Secrets    Secrets
}

// TenantConfig is one entry of `gpu-tenancy:tenants`: the tenant's host-side settings and the size of its vCluster.
type TenantConfig struct {
	tenancy.TenantArgs
	VCluster vcluster.ControlPlane `json:"vcluster"`
}

// DRADriverConfig is `gpu-tenancy:draDriver`.
type DRADriverConfig struct {
	// Enabled installs the NVIDIA DRA driver (default true).
	Enabled *bool `json:"enabled"`
	dra.DriverArgs
}

// PlatformConfig is `gpu-tenancy:platform`; its admin password and license token are separate secret keys.
type PlatformConfig struct {
	// Enabled connects every tenant's vCluster to vCluster Platform (default true: DRA sync is a platform feature).
	Enabled *bool `json:"enabled"`
	// Install installs the platform (default true); false connects to one already running in namespace
	// vcluster-platform at Host.
	Install *bool `json:"install"`
	vcluster.PlatformArgs
}

// Secret is a secret config value; it prints redacted so it cannot leak through an error or log line.
type Secret string

func (Secret) String() string { return "[secret]" }

// Secrets are the secret config values, present only when set with `pulumi config set --secret`.
type Secrets struct {
	Kubeconfig            Secret
	PlatformAdminPassword Secret
	PlatformLicenseToken  Secret
	// PlatformAccessKeys are each tenant vCluster's own platform access key, by tenant (DRA sync is a platform feature).
	PlatformAccessKeys map[string]Secret
}

func enabled(b *bool) bool { return b == nil || *b }

// DRAEnabled reports whether the NVIDIA DRA driver is installed.
func (c *Config) DRAEnabled() bool { return enabled(c.DRADriver.Enabled) }

// PlatformEnabled reports whether tenants connect to vCluster Platform.
func (c *Config) PlatformEnabled() bool { return enabled(c.Platform.Enabled) }

// PlatformInstalled reports whether this stack installs vCluster Platform.
func (c *Config) PlatformInstalled() bool { return c.PlatformEnabled() && enabled(c.Platform.Install) }

// Grants maps each tenant to its granted classes, as the catalog labels them.
func (c *Config) Grants() map[string][]string {
	grants := map[string][]string{}
	for _, t := range c.Tenants {
		grants[t.Name] = t.Classes
	}
	return grants
}

// TenantNames lists the tenants in config order.
func (c *Config) TenantNames() []string {
	names := make([]string, len(c.Tenants))
	for i, t := range c.Tenants {
		names[i] = t.Name
	}
	return names
}

// ClassNames lists the GPU classes in config order.
func (c *Config) ClassNames() []string {
	names := make([]string, len(c.GPUClasses))
	for i, class := range c.GPUClasses {
		names[i] = class.Name
	}
	return names
}

// GPUPools is what the chosen cloud's pools offer, built by that cloud's own contract function; pools with an
// unknown model are left out (validation reports them).
func (c *Config) GPUPools() []cluster.GPUPool {
	var out []cluster.GPUPool
	add := func(p cluster.GPUPool, ok bool) {
		if ok {
			out = append(out, p)
		}
	}
	switch c.Cloud {
	case cluster.GKE:
		for _, p := range c.GKE.GPUPools {
			add(gke.PoolContract(p))
		}
	case cluster.Scaleway:
		for _, p := range c.Scaleway.GPUPools {
			add(scaleway.PoolContract(p))
		}
	case cluster.Existing:
		for _, p := range c.Existing.GPUPools {
			add(cluster.ExistingPoolContract(p))
		}
	}
	return out
}

// withDefaults fills in what the stack config leaves out, with each component's documented defaults.
func (c *Config) withDefaults() {
	c.GKE = c.GKE.WithDefaults()
	c.Scaleway = c.Scaleway.WithDefaults()
	for i := range c.Tenants {
		t := &c.Tenants[i]
		t.TenantArgs = t.TenantArgs.WithDefaults()
		t.VCluster = t.VCluster.WithDefaults()
	}
	c.VCluster = c.VCluster.WithDefaults()
	c.Admission = c.Admission.WithDefaults()
}
