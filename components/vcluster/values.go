package vcluster

// The vcluster chart's values this project sets, as typed structs; keys left out keep the chart defaults. Key names
// follow the chart's values.schema.json (vcluster v0.36.1), which rejects unknown keys.

type vclusterValues struct {
	Sync             syncValues              `json:"sync"`
	Networking       networkingValues        `json:"networking"`
	ControlPlane     *controlPlaneValues     `json:"controlPlane,omitempty"`
	ExportKubeConfig *exportKubeConfigValues `json:"exportKubeConfig,omitempty"`
	Platform         *platformConnValues     `json:"platform,omitempty"`
	Policies         *policiesValues         `json:"policies,omitempty"`
	Experimental     *experimentalValues     `json:"experimental,omitempty"`
}

// experimentalValues: deploy.vcluster.manifests are objects the syncer applies inside the virtual cluster, never on
// the host (loft-sh/vcluster v0.36.1 pkg/controllers/deploy/deploy.go); not a Pro feature (config/config.go
// IsProFeatureEnabled).
type experimentalValues struct {
	Deploy experimentalDeployValues `json:"deploy"`
}

type experimentalDeployValues struct {
	VCluster deployManifestsValues `json:"vcluster"`
}

type deployManifestsValues struct {
	Manifests string `json:"manifests"`
}

type networkingValues struct {
	Advanced networkingAdvancedValues `json:"advanced"`
}

type networkingAdvancedValues struct {
	ProxyKubelets proxyKubeletsValues `json:"proxyKubelets"`
}

// proxyKubeletsValues: byIP makes the syncer create one host Service per node its tenant's pods run on
// (loft-sh/vcluster v0.36.1 pkg/controllers/resources/nodes/nodeservice/node_service.go), which the tenant's Service
// quota would have to grow with; the virtual nodes' kubelets stay reachable by hostname (byHostname, the chart's
// default, through the vCluster's own Service: config/config.go ProxyKubelets).
type proxyKubeletsValues struct {
	ByIP bool `json:"byIP"`
}

type policiesValues struct {
	// The virtual cluster labels every namespace with this Pod Security level and refuses to sync a pod that
	// violates it (loft-sh/vcluster v0.36.1 pkg/controllers/podsecurity/podsecurity.go,
	// pkg/controllers/resources/pods/validate_pod_security.go).
	PodSecurityStandard string `json:"podSecurityStandard"`
}

type syncValues struct {
	ToHost   syncToHostValues   `json:"toHost"`
	FromHost syncFromHostValues `json:"fromHost"`
}

type syncToHostValues struct {
	Pods *podSyncValues `json:"pods,omitempty"`
	// ResourceClaims, ResourceClaimTemplates and fromHost.deviceClasses are the Pro DRA sync (GPUAccess): left out, the
	// chart's defaults keep them off.
	ResourceClaims         *enableSwitch `json:"resourceClaims,omitempty"`
	ResourceClaimTemplates *enableSwitch `json:"resourceClaimTemplates,omitempty"`
	// PriorityClasses copies the virtual cluster's classes to the host, so that a pod keeps its class (and so its
	// preemptionPolicy, which vCluster copies either way) on the host; the host guards bound what it writes
	// (components/tenancy priorityClassPolicy).
	PriorityClasses enableSwitch `json:"priorityClasses"`
}

type podSyncValues struct {
	// Strings in vCluster's toleration syntax: key=value:Effect or key:Effect (pkg/util/toleration).
	EnforceTolerations []string `json:"enforceTolerations"`
}

type syncFromHostValues struct {
	DeviceClasses *deviceClassSyncValues `json:"deviceClasses,omitempty"`
	Nodes         *nodeSyncValues        `json:"nodes,omitempty"`
}

type nodeSyncValues struct {
	Selector nodeSelectorValues `json:"selector"`
}

type nodeSelectorValues struct {
	Labels map[string]string `json:"labels"`
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
	Distro      *distroValues      `json:"distro,omitempty"`
	CoreDNS     *coreDNSValues     `json:"coredns,omitempty"`
}

type coreDNSValues struct {
	Deployment coreDNSDeploymentValues `json:"deployment"`
}

type coreDNSDeploymentValues struct {
	Image string `json:"image"`
}

type statefulSetValues struct {
	Image       *imageValues       `json:"image,omitempty"`
	Resources   *resourceValues    `json:"resources,omitempty"`
	Persistence *persistenceValues `json:"persistence,omitempty"`
	Security    *securityValues    `json:"security,omitempty"`
}

// securityValues hold the control plane pod's security contexts; the container context applies to the syncer only,
// not to the init containers (chart/templates/statefulset.yaml, _init-containers.tpl).
type securityValues struct {
	PodSecurityContext       *securityContext `json:"podSecurityContext,omitempty"`
	ContainerSecurityContext *securityContext `json:"containerSecurityContext,omitempty"`
}

// distroValues reach the "kubernetes" init container, which copies the virtual cluster's binaries.
type distroValues struct {
	K8s distroK8sValues `json:"k8s"`
}

type distroK8sValues struct {
	Image           *imageValues     `json:"image,omitempty"`
	SecurityContext *securityContext `json:"securityContext,omitempty"`
}

// securityContext is the subset of a Kubernetes (Pod)SecurityContext the project sets.
type securityContext struct {
	RunAsNonRoot             *bool           `json:"runAsNonRoot,omitempty"`
	RunAsUser                *int64          `json:"runAsUser,omitempty"`
	RunAsGroup               *int64          `json:"runAsGroup,omitempty"`
	FSGroup                  *int64          `json:"fsGroup,omitempty"`
	AllowPrivilegeEscalation *bool           `json:"allowPrivilegeEscalation,omitempty"`
	Capabilities             *capabilities   `json:"capabilities,omitempty"`
	SeccompProfile           *seccompProfile `json:"seccompProfile,omitempty"`
}

type capabilities struct {
	Drop []string `json:"drop"`
}

type seccompProfile struct {
	Type string `json:"type"`
}

type imageValues struct {
	Registry   string `json:"registry,omitempty"`
	Repository string `json:"repository,omitempty"`
	Tag        string `json:"tag"`
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
}
