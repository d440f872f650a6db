package pipeline

import "github.com/gpu-tenancy/gpu-tenancy/components/helmchart"

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
	keyAdminPassword = "platformAdminPassword"
	keyLicenseToken  = "platformLicenseToken"
	keyAccessKey     = "platformAccessKey"
)

var knownKeys = []string{keyCloud, keyGKE, keyScaleway, keyExisting, keyKubeconfig, keyGPUPools, keyGPUClasses,
	keyTenants, keyDRADriver, keyPlatform, keyVCluster, keyAdminPassword, keyLicenseToken, keyAccessKey}

// Config is the whole stack config after defaults, parsed and validated.
type Config struct {
	Cloud      string
	GKE        GKEConfig
	Scaleway   ScalewayConfig
	Existing   ExistingConfig
	GPUPools   []GPUPoolConfig
	GPUClasses []GPUClassConfig
	Tenants    []TenantConfig
	DRADriver  DRADriverConfig
	Platform   PlatformConfig
	VCluster   VClusterConfig
	Secrets    Secrets
}

// Secret is a secret config value; it prints redacted so it cannot leak through an error or log line.
type Secret string

func (Secret) String() string { return "[secret]" }

// Secrets are the secret config values, present only when set with `pulumi config set --secret`.
type Secrets struct {
	Kubeconfig            Secret
	PlatformAdminPassword Secret
	PlatformLicenseToken  Secret
	// PlatformAccessKey lets tenant vClusters register with the platform (DRA sync is a platform feature).
	PlatformAccessKey Secret
}

// GKEConfig is `gpu-tenancy:gke`.
type GKEConfig struct {
	Project            string        `json:"project"`
	Zone               string        `json:"zone"`
	KubernetesVersion  string        `json:"kubernetesVersion"`
	ReleaseChannel     string        `json:"releaseChannel"`
	DeletionProtection *bool         `json:"deletionProtection"`
	AllowUnlistedZone  bool          `json:"allowUnlistedZone"`
	SystemPool         GKESystemPool `json:"systemPool"`
}

// GKESystemPool is `gpu-tenancy:gke.systemPool`.
type GKESystemPool struct {
	MachineType string `json:"machineType"`
	MinNodes    *int   `json:"minNodes"`
	MaxNodes    *int   `json:"maxNodes"`
}

// ScalewayConfig is `gpu-tenancy:scaleway`.
type ScalewayConfig struct {
	Zone                      string              `json:"zone"`
	KubernetesVersion         string              `json:"kubernetesVersion"`
	CNI                       string              `json:"cni"`
	DeleteAdditionalResources bool                `json:"deleteAdditionalResources"`
	AllowUnlistedZone         bool                `json:"allowUnlistedZone"`
	AutoUpgrade               ScalewayAutoUpgrade `json:"autoUpgrade"`
	Autoscaler                ScalewayAutoscaler  `json:"autoscaler"`
	SystemPool                ScalewaySystemPool  `json:"systemPool"`
}

// ScalewayAutoUpgrade is `gpu-tenancy:scaleway.autoUpgrade`.
type ScalewayAutoUpgrade struct {
	Enabled                    *bool  `json:"enabled"`
	MaintenanceWindowDay       string `json:"maintenanceWindowDay"`
	MaintenanceWindowStartHour *int   `json:"maintenanceWindowStartHour"`
}

// ScalewayAutoscaler is `gpu-tenancy:scaleway.autoscaler`.
type ScalewayAutoscaler struct {
	ScaleDownDelayAfterAdd string `json:"scaleDownDelayAfterAdd"`
	ScaleDownUnneededTime  string `json:"scaleDownUnneededTime"`
	Expander               string `json:"expander"`
}

// ScalewaySystemPool is `gpu-tenancy:scaleway.systemPool`.
type ScalewaySystemPool struct {
	NodeType string `json:"nodeType"`
	MinNodes *int   `json:"minNodes"`
	MaxNodes *int   `json:"maxNodes"`
}

// ExistingConfig is `gpu-tenancy:existing`; the kubeconfig itself may instead be the secret `gpu-tenancy:kubeconfig`.
type ExistingConfig struct {
	KubeconfigPath string `json:"kubeconfigPath"`
	DriverRoot     string `json:"driverRoot"`
}

// GPUPoolConfig is one entry of `gpu-tenancy:gpuPools`. Which fields apply depends on the cloud.
type GPUPoolConfig struct {
	Name string `json:"name"`
	// GKE
	MachineType string `json:"machineType"`
	Accelerator string `json:"accelerator"`
	GPUCount    int    `json:"gpuCount"`
	// Scaleway
	NodeType string `json:"nodeType"`
	// existing
	Model       string `json:"model"`
	GPUsPerNode int    `json:"gpusPerNode"`
	// all clouds
	Partition string `json:"partition"`
	MinNodes  *int   `json:"minNodes"`
	MaxNodes  *int   `json:"maxNodes"`
}

// GPUClassConfig is one entry of `gpu-tenancy:gpuClasses`.
type GPUClassConfig struct {
	Name       string `json:"name"`
	Device     string `json:"device"`
	MIGProfile string `json:"migProfile"`
	Product    string `json:"product"`
	ExtraCEL   string `json:"extraCEL"`
}

// TenantConfig is one entry of `gpu-tenancy:tenants`.
type TenantConfig struct {
	Name               string         `json:"name"`
	Classes            []string       `json:"classes"`
	GPUQuota           map[string]int `json:"gpuQuota"`
	CPUQuota           string         `json:"cpuQuota"`
	MemoryQuota        string         `json:"memoryQuota"`
	VCluster           TenantVCluster `json:"vcluster"`
	BlockedEgressCIDRs []string       `json:"blockedEgressCIDRs"`
}

// TenantVCluster sizes a tenant's virtual cluster control plane.
type TenantVCluster struct {
	CPU          string `json:"cpu"`
	Memory       string `json:"memory"`
	StorageSize  string `json:"storageSize"`
	StorageClass string `json:"storageClass"`
}

// DRADriverConfig is `gpu-tenancy:draDriver`.
type DRADriverConfig struct {
	Enabled        *bool           `json:"enabled"`
	Chart          helmchart.Chart `json:"chart"`
	ComputeDomains bool            `json:"computeDomains"`
}

// PlatformConfig is `gpu-tenancy:platform`; its admin password and license token are separate secret keys.
type PlatformConfig struct {
	Enabled *bool           `json:"enabled"`
	Chart   helmchart.Chart `json:"chart"`
	Host    string          `json:"host"`
}

// VClusterConfig is `gpu-tenancy:vcluster`.
type VClusterConfig struct {
	// Enabled gives each tenant a vCluster; without it tenants get only their host-side guard rails.
	Enabled *bool           `json:"enabled"`
	Chart   helmchart.Chart `json:"chart"`
	// Await waits for each virtual cluster to become ready and reads its kubeconfig; off on a control plane
	// without kubelets, where nothing ever runs.
	Await *bool `json:"await"`
	// KubeconfigServer is the server URL written into each tenant's kubeconfig, with {tenant} standing for the
	// tenant's name (https://{tenant}.vcluster.example.com); empty keeps vCluster's https://localhost:8443, which
	// works only through a port-forward.
	KubeconfigServer string `json:"kubeconfigServer"`
}

func enabled(b *bool, def bool) bool {
	if b == nil {
		return def
	}
	return *b
}

// DRAEnabled reports whether the NVIDIA DRA driver is installed (default on).
func (c *Config) DRAEnabled() bool { return enabled(c.DRADriver.Enabled, true) }

// PlatformEnabled reports whether vCluster Platform is installed (default on: DRA sync is a platform feature).
func (c *Config) PlatformEnabled() bool { return enabled(c.Platform.Enabled, true) }

// VClusterEnabled reports whether tenants get a vCluster (default on).
func (c *Config) VClusterEnabled() bool { return enabled(c.VCluster.Enabled, true) }

// VClusterAwait reports whether virtual clusters are awaited (default on).
func (c *Config) VClusterAwait() bool { return enabled(c.VCluster.Await, true) }
