package vcluster

// The vcluster chart's values this project sets, as typed structs; keys left out keep the chart defaults. Key names
// follow the chart's values.schema.json (vcluster v0.36.1), which rejects unknown keys.

type vclusterValues struct {
	Sync             syncValues              `json:"sync"`
	ControlPlane     *controlPlaneValues     `json:"controlPlane,omitempty"`
	ExportKubeConfig *exportKubeConfigValues `json:"exportKubeConfig,omitempty"`
	Platform         *platformConnValues     `json:"platform,omitempty"`
}

type syncValues struct {
	ToHost   syncToHostValues   `json:"toHost"`
	FromHost syncFromHostValues `json:"fromHost"`
}

type syncToHostValues struct {
	Pods                   *podSyncValues `json:"pods,omitempty"`
	ResourceClaims         enableSwitch   `json:"resourceClaims"`
	ResourceClaimTemplates enableSwitch   `json:"resourceClaimTemplates"`
}

type podSyncValues struct {
	// Strings in vCluster's toleration syntax: key=value:Effect or key:Effect (pkg/util/toleration).
	EnforceTolerations []string `json:"enforceTolerations"`
}

type syncFromHostValues struct {
	DeviceClasses deviceClassSyncValues `json:"deviceClasses"`
}

type deviceClassSyncValues struct {
	Enabled  bool          `json:"enabled"`
	Selector labelSelector `json:"selector"`
}

type labelSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

type enableSwitch struct {
	Enabled bool `json:"enabled"`
}

type controlPlaneValues struct {
	StatefulSet *statefulSetValues `json:"statefulSet,omitempty"`
	Proxy       *proxyValues       `json:"proxy,omitempty"`
}

type statefulSetValues struct {
	Image       *imageValues       `json:"image,omitempty"`
	Resources   *resourceValues    `json:"resources,omitempty"`
	Persistence *persistenceValues `json:"persistence,omitempty"`
}

type imageValues struct {
	Tag string `json:"tag"`
}

type resourceValues struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

type persistenceValues struct {
	VolumeClaim volumeClaimValues `json:"volumeClaim"`
}

type volumeClaimValues struct {
	Size         string `json:"size,omitempty"`
	StorageClass string `json:"storageClass,omitempty"`
}

type proxyValues struct {
	ExtraSANs []string `json:"extraSANs"`
}

type exportKubeConfigValues struct {
	Server string `json:"server"`
}

type platformConnValues struct {
	APIKey  platformAPIKeyValues `json:"apiKey"`
	Project string               `json:"project,omitempty"`
}

type platformAPIKeyValues struct {
	SecretName string `json:"secretName"`
	Namespace  string `json:"namespace"`
	// The chart then grants the vCluster read access to the key Secret in the platform's namespace.
	CreateRBAC bool `json:"createRBAC"`
}
