// Package vcluster installs the vCluster Platform and one virtual cluster per tenant. A tenant's vCluster sees only
// the host DeviceClasses granted to it (by label) and syncs its ResourceClaims to the host, where the host's DRA driver,
// admission policy and quotas apply.
package vcluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	helmv4 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/helm/v4"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Chart defaults: v0.36.1 is the newest stable vCluster release (https://github.com/loft-sh/vcluster/releases) and
// its charts are published at https://charts.loft.sh.
const (
	ChartRepo         = "https://charts.loft.sh"
	VClusterChartName = "vcluster"
	VClusterVersion   = "0.36.1"
)

// OpenSourceImage is vCluster's open-source build, which the chart runs in place of its default Pro image for a tenant
// that needs no Pro feature (https://www.vcluster.com/docs/vcluster/introduction/oss-vs-free).
const OpenSourceImage = "ghcr.io/loft-sh/vcluster-oss"

// DefaultVirtualClusterChart is the vCluster chart installed when VirtualClusterArgs.Chart is left empty.
var DefaultVirtualClusterChart = helmchart.Chart{Repo: ChartRepo, Name: VClusterChartName, Version: VClusterVersion}

// Where vCluster writes the tenant kubeconfig on the host: Secret vc-<vcluster name>, key config
// (loft-sh/vcluster v0.36.1 pkg/util/kubeconfig/kubeconfig.go).
const (
	KubeconfigSecretPrefix = naming.KubeconfigSecretPrefix
	KubeconfigSecretKey    = "config"
)

// Where the chart stores a vCluster's effective config on the host: Secret vc-config-<release>, key config.yaml, the
// chart's values as YAML (loft-sh/vcluster v0.36.1 chart/templates/config-secret.yaml).
const (
	ConfigSecretPrefix = "vc-config-"
	ConfigSecretKey    = "config.yaml"
)

// MaxReleaseName bounds a vCluster's name: the chart names its StatefulSet after the release, and the StatefulSet
// controller labels each pod controller-revision-hash=<name>-<hash of up to 10 characters>, a label value of at most
// 63 characters (kubernetes/kubernetes#64023). Helm's own limit on release names is 53.
const MaxReleaseName = 52

// Settings are what every tenant's vCluster shares; a stack's `vcluster` block decodes into them.
type Settings struct {
	// Enabled gives each tenant a vCluster (default true); without it tenants get only their host-side guard rails.
	Enabled *bool `json:"enabled"`
	// Chart defaults to DefaultVirtualClusterChart.
	Chart helmchart.Chart `json:"chart"`
	// Await waits for each virtual cluster to become ready and reads its kubeconfig (default true); off on a control
	// plane without kubelets, where nothing ever runs.
	Await *bool `json:"await"`
	// KubeconfigServer is the server URL written into each tenant's kubeconfig, with TenantPlaceholder standing for
	// the tenant's name (https://{tenant}.vcluster.example.com) and ServiceIPPlaceholder for its vCluster Service's
	// cluster IP (https://{serviceIP}); empty keeps vCluster's https://localhost:8443, which works only through a
	// port-forward.
	KubeconfigServer string `json:"kubeconfigServer"`
	// APIClientCIDRs are the addresses outside the cluster whose clients reach each tenant's vCluster API directly,
	// as the local stack's machine reaches https://{serviceIP}, or through a load balancer that keeps their address:
	// each tenant namespace's NetworkPolicies admit them on APIPort and on no other port. Empty admits none, and the
	// API is reached through the vCluster Platform's namespace or from inside the tenant's namespace. The list must not
	// cover the cluster's pod or node ranges (docs/threat-model.md, "Accepted risks"); /0 is refused.
	APIClientCIDRs []string `json:"apiClientCIDRs"`
	// Images replace the images every vCluster runs, for a cluster that pulls from a registry of its own (an
	// air-gapped one) or, on the local stack, runs the images built there (scripts/local-nodes.sh); empty keeps the
	// chart's.
	Images Images `json:"images"`
	// GPUAccess is how tenants' GPUs reach them unless a tenant says otherwise (tenants[].gpuAccess): ClaimSync when
	// unset.
	GPUAccess GPUAccess `json:"gpuAccess"`
}

// Images are full image references, each with a tag and best with a digest too (registry/repository:tag@sha256:...):
// the chart writes repository:tag (loft-sh/vcluster v0.36.1 chart/templates/_helper.tpl "vcluster.image"), so a
// reference without a tag cannot be written.
type Images struct {
	// ControlPlane is the syncer's image (chart: controlPlane.statefulSet.image) of the tenants whose vCluster syncs
	// claims (GPUAccess ClaimSync or BothAccess): the Pro build (ghcr.io/loft-sh/vcluster-pro, the chart's default),
	// which the DRA sync needs, or the open-source one where nothing is synced through it.
	ControlPlane string `json:"controlPlane"`
	// OpenSourceControlPlane is the syncer's image of the tenants that get GPUs as extended resources only
	// (GPUAccess ExtendedResources); default OpenSourceImage at the chart's version.
	OpenSourceControlPlane string `json:"openSourceControlPlane"`
	// Kubernetes holds the virtual control plane's binaries, which an init container copies
	// (controlPlane.distro.k8s.image; the chart's is ghcr.io/loft-sh/kubernetes).
	Kubernetes string `json:"kubernetes"`
	// CoreDNS is the virtual cluster's DNS (controlPlane.coredns.deployment.image; vCluster's default is
	// docker.io/coredns/coredns, loft-sh/vcluster v0.36.1 pkg/coredns/coredns.go).
	CoreDNS string `json:"coreDNS"`
}

// Validate checks that each image given is a reference with a tag.
func (i Images) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, im := range []struct{ key, ref string }{{"controlPlane", i.ControlPlane},
		{"openSourceControlPlane", i.OpenSourceControlPlane}, {"kubernetes", i.Kubernetes}, {"coreDNS", i.CoreDNS}} {
		if im.ref == "" {
			continue
		}
		if _, err := parseImage(im.ref); err != nil {
			errs = append(errs, field.Invalid(path.Child(im.key), im.ref, err.Error()))
		}
	}
	return errs
}

// parseImage reads a reference that has a tag, and a digest or not.
func parseImage(ref string) (reference.NamedTagged, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return nil, fmt.Errorf("not an image reference (%v); want registry/repository:tag@sha256:<digest>", err)
	}
	tagged, ok := named.(reference.NamedTagged)
	if !ok {
		return nil, errors.New("needs a tag (the chart writes repository:tag); want registry/repository:tag@sha256:<digest>")
	}
	return tagged, nil
}

// imageOf writes a valid reference in the chart's three parts; a digest rides on the tag.
func imageOf(ref string) *imageValues {
	tagged, err := parseImage(ref)
	if err != nil {
		panic(fmt.Sprintf("imageOf: %q was not validated: %v", ref, err))
	}
	tag := tagged.Tag()
	if d, ok := tagged.(reference.Digested); ok {
		tag += "@" + d.Digest().String()
	}
	return &imageValues{Registry: reference.Domain(tagged), Repository: reference.Path(tagged), Tag: tag}
}

// APIPort is the port the vCluster API listens on in its pod, behind its Service's 443 (loft-sh/vcluster v0.36.1
// chart/templates/service.yaml targetPort).
const APIPort = 8443

// TenantPlaceholder stands for the tenant's name in Settings.KubeconfigServer.
const TenantPlaceholder = "{tenant}"

// ServiceIPPlaceholder stands for the cluster IP of the tenant's vCluster Service on the host in a kubeconfig server:
// an address that only clients on the host cluster's network reach (the local stack's machine, runners inside the
// cluster), and one that vCluster puts in its serving certificate itself (loft-sh/vcluster v0.36.1
// pkg/server/cert/cert.go getExtraSANs), so no name is added to it. The Service is in the tenant's namespace, where its
// syncer may delete and recreate Services, so the tenant can choose where its own kubeconfig points, and nobody
// else's: the kubeconfig carries that tenant's credentials only, and its CA is the one the platform pinned.
const ServiceIPPlaceholder = "{serviceIP}"

// IsEnabled and Awaits read the switches with their defaults.
func (s Settings) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }
func (s Settings) Awaits() bool    { return s.Await == nil || *s.Await }

// WithDefaults fills in the default chart.
func (s Settings) WithDefaults() Settings {
	if s.Chart == (helmchart.Chart{}) {
		s.Chart = DefaultVirtualClusterChart
	}
	return s
}

// ServerFor is the kubeconfig server of one tenant's vCluster.
func (s Settings) ServerFor(tenant string) string {
	return strings.ReplaceAll(s.KubeconfigServer, TenantPlaceholder, tenant)
}

// Validate checks the shared settings.
func (s Settings) Validate(path *field.Path) field.ErrorList {
	errs := s.Chart.Validate(path.Child("chart"))
	if s.KubeconfigServer != "" {
		errs = append(errs, validateServer(path.Child("kubeconfigServer"), s.KubeconfigServer, TenantPlaceholder)...)
	}
	for i, c := range s.APIClientCIDRs {
		errs = append(errs, fieldcheck.NarrowCIDR(path.Child("apiClientCIDRs").Index(i), c,
			"admits every address, other tenants' pods among them; list the clients' own ranges")...)
	}
	errs = append(errs, s.GPUAccess.Validate(path.Child("gpuAccess"))...)
	return append(errs, s.Images.Validate(path.Child("images"))...)
}

// validateServer refuses anything but https: the kubeconfig carries the tenant's credentials, which plain http would
// send in clear (vCluster itself accepts http too: loft-sh/vcluster v0.36.1 pkg/config/validation.go).
func validateServer(path *field.Path, server, placeholder string) field.ErrorList {
	if usesServiceIP(server) {
		if server != "https://"+ServiceIPPlaceholder {
			return field.ErrorList{field.Invalid(path, server, "the cluster IP stands alone: https://"+ServiceIPPlaceholder+
				" (vCluster's Service listens on 443)")}
		}
		return nil
	}
	return fieldcheck.HTTPSURL(path, server, placeholder,
		"https://{tenant}.vcluster.example.com ({tenant} is replaced per tenant)")
}

// ControlPlane sizes a tenant's vCluster control plane; a stack's `tenants[].vcluster` block decodes into it.
type ControlPlane struct {
	// CPU is the control plane's CPU request (default 1).
	CPU string `json:"cpu"`
	// Memory is its memory request and limit (default 2Gi).
	Memory string `json:"memory"`
	// StorageSize is its volume's size (default 5Gi).
	StorageSize string `json:"storageSize"`
	// StorageClass is its volume's storage class; empty takes the cluster's default.
	StorageClass string `json:"storageClass"`
}

// Control plane defaults.
const (
	DefaultCPU         = "1"
	DefaultMemory      = "2Gi"
	DefaultStorageSize = "5Gi"
)

// WithDefaults fills in the default sizes.
func (c ControlPlane) WithDefaults() ControlPlane {
	if c.CPU == "" {
		c.CPU = DefaultCPU
	}
	if c.Memory == "" {
		c.Memory = DefaultMemory
	}
	if c.StorageSize == "" {
		c.StorageSize = DefaultStorageSize
	}
	return c
}

// Validate checks the sizes: positive quantities, and a storage class name.
func (c ControlPlane) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, fieldcheck.Quantity(path.Child("cpu"), c.CPU, true)...)
	errs = append(errs, fieldcheck.Quantity(path.Child("memory"), c.Memory, true)...)
	errs = append(errs, fieldcheck.Quantity(path.Child("storageSize"), c.StorageSize, true)...)
	if c.StorageClass != "" {
		errs = append(errs, fieldcheck.DNSSubdomain(path.Child("storageClass"), c.StorageClass, validation.DNS1123SubdomainMaxLength)...)
	}
	return errs
}

// ValidateReleaseName checks a vCluster's name, which names its Helm release and StatefulSet.
func ValidateReleaseName(path *field.Path, name string) field.ErrorList {
	return fieldcheck.DNSLabel(path, name, MaxReleaseName)
}

// PlatformConnection is what every tenant's vCluster shares to register with the vCluster Platform; each brings its
// own access key (VirtualClusterArgs.PlatformAccessKey).
type PlatformConnection struct {
	// Host is the platform's host name, written into each vCluster's key Secret.
	Host string
	// Project is the platform project the vClusters are imported into.
	Project string
}

// VirtualClusterArgs configure one tenant's virtual cluster.
type VirtualClusterArgs struct {
	// Tenant names the vCluster (and its Helm release); see ValidateReleaseName.
	Tenant string
	// Namespace is the tenant's host namespace, created elsewhere.
	Namespace pulumi.StringInput
	// Chart defaults to DefaultVirtualClusterChart. With a local Path, Version names the vCluster release whose
	// images to run (default VClusterVersion): the chart in the Go module carries a placeholder version.
	Chart helmchart.Chart
	// ClassSelectorLabel is the DeviceClass label that grants a class to this tenant; only classes labelled
	// "<ClassSelectorLabel>: true" are synced into the vCluster. Required.
	ClassSelectorLabel string
	// GPUTolerations are added to every pod the vCluster syncs to the host, so GPU workloads reach tainted GPU nodes.
	GPUTolerations []cluster.Taint
	// Dedicated puts every pod the vCluster syncs on the pools dedicated to the tenant (cluster.PoolSpec.Tenant): each
	// tolerates their taint and selects their nodes. vCluster sets the selector on each host pod it creates
	// (loft-sh/vcluster v0.36.1 pkg/controllers/resources/pods/syncer.go, sync.fromHost.nodes.selector.labels), which
	// works without syncing the nodes themselves.
	Dedicated bool
	// ControlPlane sizes the control plane; empty fields keep the chart defaults.
	ControlPlane ControlPlane
	// KubeconfigServer is the server URL written into the exported kubeconfig; empty keeps vCluster's
	// https://localhost:8443, usable only through a port-forward.
	KubeconfigServer string
	// GPUAccess is how the tenant's GPUs reach it; unset is ClaimSync. Without ClaimSync the vCluster runs the
	// open-source syncer, with no DRA sync, no Platform connection and no access key.
	GPUAccess GPUAccess
	// KubeconfigLost says the running vCluster's kubeconfig Secret is gone: the read of it, which would fail the whole
	// deployment, is left out, and the kubeconfig output is empty.
	KubeconfigLost bool
	// OfferedClasses are the classes the tenant may ask for by name; the vCluster holds them in ConfigMap
	// OfferedConfigMap of namespace OfferedNamespace, where the tenant reads them, and no other tenant's.
	OfferedClasses []OfferedClass
	// Platform connects the vCluster to the vCluster Platform; DRA sync is a platform feature
	// (loft-sh/vcluster v0.36.1 config/config.go IsProFeatureEnabled).
	Platform *PlatformConnection
	// PlatformAccessKey is this vCluster's own platform access key, scoped to its virtual cluster instance (keep it a
	// secret). It is written to Secret APIKeySecretName in the tenant's namespace, which only this tenant's syncer can
	// read; with none, that Secret is the operator's to create. A key shared by tenants would let each act on the
	// platform as the key's creator.
	PlatformAccessKey pulumi.StringInput
	// Await waits for the vCluster to become ready and reads its kubeconfig. Leave false where nothing can run
	// (a control plane without kubelets).
	Await bool
	// Images replace the chart's images (see Settings.Images).
	Images Images
	// PodSecurity is the Pod Security Standard of the tenant's host namespace (baseline or restricted): the virtual
	// cluster enforces it too, so a tenant hears of a refused pod from its own API server, and the control plane pod
	// is made to pass it. Empty enforces nothing inside.
	PodSecurity string
}

// NonRootID is the user and group the control plane runs as under restricted, as vCluster documents for running
// without root (https://www.vcluster.com/docs/vcluster/deploy/security/rootless-mode); the syncer passes it on to
// the virtual cluster's DNS.
const NonRootID = 12345

// VirtualCluster is one tenant's virtual cluster.
type VirtualCluster struct {
	pulumi.ResourceState

	// Chart is the vCluster chart's objects, applied one by one (see NewVirtualCluster for why not a Helm release).
	Chart *helmv4.Chart
	// KubeconfigSecretNamespace and KubeconfigSecretName locate the host Secret holding the tenant kubeconfig
	// (key KubeconfigSecretKey).
	KubeconfigSecretNamespace pulumi.StringOutput
	KubeconfigSecretName      pulumi.StringOutput
	// Kubeconfig is the tenant kubeconfig, always secret; empty unless Await.
	Kubeconfig pulumi.StringOutput
}

// Validate checks the args (the constructor's own check; a stack config's tenant is checked through ControlPlane,
// ValidateReleaseName and Settings at its own paths).
func (a *VirtualClusterArgs) Validate(path *field.Path) field.ErrorList {
	errs := ValidateReleaseName(path.Child("tenant"), a.Tenant)
	if a.Namespace == nil {
		errs = append(errs, field.Required(path.Child("namespace"), "the tenant's host namespace"))
	}
	if a.ClassSelectorLabel == "" {
		errs = append(errs, field.Required(path.Child("classSelectorLabel"), "without it every host DeviceClass, "+
			"the driver's unrestricted ones included, is synced into the vCluster"))
	} else {
		for _, msg := range validation.IsQualifiedName(a.ClassSelectorLabel) {
			errs = append(errs, field.Invalid(path.Child("classSelectorLabel"), a.ClassSelectorLabel, msg))
		}
	}
	for i, t := range a.GPUTolerations {
		errs = append(errs, t.Validate(path.Child("gpuTolerations").Index(i))...)
	}
	errs = append(errs, a.ControlPlane.Validate(path.Child("controlPlane"))...)
	errs = append(errs, a.Chart.Validate(path.Child("chart"))...)
	errs = append(errs, a.Images.Validate(path.Child("images"))...)
	if a.KubeconfigServer != "" {
		errs = append(errs, validateServer(path.Child("kubeconfigServer"), a.KubeconfigServer, "")...)
	}
	if p := a.Platform; p != nil && p.Host == "" {
		errs = append(errs, field.Required(path.Child("platform", "host"), "the platform's host name"))
	}
	if a.PlatformAccessKey != nil && a.Platform == nil {
		errs = append(errs, field.Forbidden(path.Child("platformAccessKey"), "needs a platform connection (platform)"))
	}
	errs = append(errs, a.GPUAccess.Validate(path.Child("gpuAccess"))...)
	if a.Platform != nil && !a.GPUAccess.SyncsClaims() {
		errs = append(errs, field.Forbidden(path.Child("platform"), fmt.Sprintf(
			"a vCluster with gpuAccess %s runs the open-source syncer, which connects to no platform", a.GPUAccess)))
	}
	if a.PodSecurity != "" && !slices.Contains(naming.TenantPodSecurityLevels, a.PodSecurity) {
		errs = append(errs, field.NotSupported(path.Child("podSecurity"), a.PodSecurity, naming.TenantPodSecurityLevels))
	}
	return errs
}

// restrictedSecurity is what the control plane pod needs to pass the restricted Pod Security Standard
// (https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted): no root, no privilege
// escalation, no capabilities, the runtime's seccomp profile. The chart's default container context runs as root
// (loft-sh/vcluster v0.36.1 chart/values.yaml controlPlane.statefulSet.security).
func restrictedSecurity() (*securityValues, *securityContext) {
	id := int64(NonRootID)
	container := &securityContext{
		RunAsNonRoot: ptr(true), RunAsUser: &id, RunAsGroup: &id,
		AllowPrivilegeEscalation: ptr(false), Capabilities: &capabilities{Drop: []string{"ALL"}},
	}
	pod := &securityContext{
		RunAsNonRoot: ptr(true), RunAsUser: &id, RunAsGroup: &id, FSGroup: &id,
		SeccompProfile: &seccompProfile{Type: "RuntimeDefault"},
	}
	return &securityValues{PodSecurityContext: pod, ContainerSecurityContext: container}, container
}

func ptr[T any](v T) *T { return &v }

// enforcedToleration writes a taint's toleration in vCluster's syntax (loft-sh/vcluster v0.36.1
// pkg/util/toleration/toleration.go ParseToleration): key=value:Effect tolerates that value, key:Effect any value.
func enforcedToleration(t cluster.Taint) string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

func resourceMap(cpu, memory string) map[string]string {
	m := map[string]string{}
	if cpu != "" {
		m["cpu"] = cpu
	}
	if memory != "" {
		m["memory"] = memory
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// virtualClusterValues builds the chart values; args must be valid.
func virtualClusterValues(a *VirtualClusterArgs) vclusterValues {
	v := vclusterValues{Sync: syncValues{ToHost: syncToHostValues{PriorityClasses: enableSwitch{Enabled: true}}}}
	if a.GPUAccess.SyncsClaims() {
		v.Sync.ToHost.ResourceClaims = &enableSwitch{Enabled: true}
		v.Sync.ToHost.ResourceClaimTemplates = &enableSwitch{Enabled: true}
		v.Sync.FromHost.DeviceClasses = &deviceClassSyncValues{
			Enabled:  true,
			Selector: labelSelector{MatchLabels: map[string]string{a.ClassSelectorLabel: "true"}},
		}
	}
	tolerations := a.GPUTolerations
	if a.Dedicated {
		tolerations = append(slices.Clone(tolerations), cluster.DedicatedTaint(a.Tenant))
		v.Sync.FromHost.Nodes = &nodeSyncValues{Selector: nodeSelectorValues{Labels: map[string]string{naming.DedicatedNodeKey: a.Tenant}}}
	}
	if len(tolerations) > 0 {
		pods := &podSyncValues{}
		for _, t := range tolerations {
			pods.EnforceTolerations = append(pods.EnforceTolerations, enforcedToleration(t))
		}
		v.Sync.ToHost.Pods = pods
	}

	sts := &statefulSetValues{}
	if a.Chart.Path != "" {
		tag := a.Chart.Version
		if tag == "" {
			tag = VClusterVersion
		}
		sts.Image = &imageValues{Tag: tag}
	}
	switch {
	case a.GPUAccess.SyncsClaims() && a.Images.ControlPlane != "":
		sts.Image = imageOf(a.Images.ControlPlane)
	case !a.GPUAccess.SyncsClaims() && a.Images.OpenSourceControlPlane != "":
		sts.Image = imageOf(a.Images.OpenSourceControlPlane)
	case !a.GPUAccess.SyncsClaims():
		tag := a.Chart.Version
		if tag == "" {
			tag = VClusterVersion
		}
		sts.Image = imageOf(OpenSourceImage + ":" + tag)
	}
	cp := a.ControlPlane
	if req, lim := resourceMap(cp.CPU, cp.Memory), resourceMap("", cp.Memory); req != nil || lim != nil {
		sts.Resources = &resourceValues{Requests: req, Limits: lim}
	}
	if cp.StorageSize != "" || cp.StorageClass != "" {
		sts.Persistence = &persistenceValues{VolumeClaim: volumeClaimValues{Size: cp.StorageSize, StorageClass: cp.StorageClass}}
	}
	cpv := &controlPlaneValues{}
	if a.PodSecurity != "" {
		v.Policies = &policiesValues{PodSecurityStandard: a.PodSecurity}
	}
	if a.PodSecurity == naming.PodSecurityRestricted {
		var initContainer *securityContext
		sts.Security, initContainer = restrictedSecurity()
		cpv.Distro = &distroValues{K8s: distroK8sValues{SecurityContext: initContainer}}
	}
	if a.Images.Kubernetes != "" {
		if cpv.Distro == nil {
			cpv.Distro = &distroValues{}
		}
		cpv.Distro.K8s.Image = imageOf(a.Images.Kubernetes)
	}
	if a.Images.CoreDNS != "" {
		named, _ := parseImage(a.Images.CoreDNS)
		cpv.CoreDNS = &coreDNSValues{Deployment: coreDNSDeploymentValues{Image: named.String()}}
	}
	if *sts != (statefulSetValues{}) {
		cpv.StatefulSet = sts
	}
	// With the Service's cluster IP, which is known only once the chart's Service exists, vCluster keeps its own
	// server in the Secret: the platform writes the server of every kubeconfig it exports itself (readKubeconfig).
	if a.KubeconfigServer != "" && !usesServiceIP(a.KubeconfigServer) {
		v.ExportKubeConfig = &exportKubeConfigValues{Server: a.KubeconfigServer}
		// The proxy's certificate must name the host the kubeconfig points at.
		u, _ := url.Parse(a.KubeconfigServer)
		cpv.Proxy = &proxyValues{ExtraSANs: []string{u.Hostname()}}
	}
	if *cpv != (controlPlaneValues{}) {
		v.ControlPlane = cpv
	}
	if len(a.OfferedClasses) > 0 {
		manifest, err := offeredManifest(a.OfferedClasses)
		if err != nil {
			panic(fmt.Sprintf("offeredManifest: %v", err))
		}
		v.Experimental = &experimentalValues{Deploy: experimentalDeployValues{VCluster: deployManifestsValues{Manifests: manifest}}}
	}
	if p := a.Platform; p != nil {
		// The key Secret is in the vCluster's own namespace (namespace left empty), where its syncer's Role already
		// reads Secrets, so the chart grants nothing anywhere else (loft-sh/vcluster v0.36.1 chart/templates/_rbac.tpl,
		// platform-rbac.yaml: a Role in another namespace only); no tenant can read another's key.
		v.Platform = &platformConnValues{APIKey: platformAPIKeyValues{SecretName: APIKeySecretName}, Project: p.Project}
	}
	return v
}

// NewVirtualCluster installs a tenant's vCluster into its host namespace.
func NewVirtualCluster(ctx *pulumi.Context, name string, args *VirtualClusterArgs, opts ...pulumi.ResourceOption) (*VirtualCluster, error) {
	if args == nil {
		return nil, errors.New("creating virtual cluster: args are required")
	}
	if errs := args.Validate(field.NewPath("virtualCluster")); len(errs) > 0 {
		return nil, fmt.Errorf("creating virtual cluster %q: %w", name, errs.ToAggregate())
	}
	a := *args
	if a.Chart == (helmchart.Chart{}) {
		a.Chart = DefaultVirtualClusterChart
	}
	vals, err := helmchart.Values(virtualClusterValues(&a))
	if err != nil {
		return nil, fmt.Errorf("creating virtual cluster %q: %w", name, err)
	}

	vc := &VirtualCluster{}
	if err := ctx.RegisterComponentResource("gpu-tenancy:vcluster:VirtualCluster", name, vc, opts...); err != nil {
		return nil, fmt.Errorf("registering virtual cluster %q: %w", name, err)
	}
	var chartDeps []pulumi.Resource
	if a.PlatformAccessKey != nil {
		// The layout `vcluster platform add vcluster` writes (loft-sh/vcluster v0.36.1 pkg/platform/secret.go
		// ApplyPlatformSecret); name ties the vCluster to the platform's instance of that name, which the key belongs
		// to. The reader is vCluster's closed Pro build, so which keys it needs is UNCONFIRMED.
		key, err := newSecret(ctx, name+APIKeyResourceSuffix, APIKeySecretName, a.Namespace.ToStringOutput().ToStringPtrOutput(), pulumi.StringMap{
			"accessKey": a.PlatformAccessKey, "host": pulumi.String(a.Platform.Host), "project": pulumi.String(a.Platform.Project),
			"insecure": pulumi.String("false"), "name": pulumi.String(a.Tenant),
		}, pulumi.Parent(vc))
		if err != nil {
			return nil, fmt.Errorf("creating the platform access key Secret of virtual cluster %q: %w", name, err)
		}
		chartDeps = append(chartDeps, key)
	}
	// The chart is rendered and its objects applied one by one (helm/v4 Chart), not installed as a Helm release
	// (helm/v3 Release), because:
	//   - an interrupted `up` converges: re-applying an object server-side is idempotent, whereas a release left
	//     pending by a killed engine refuses the next install ("cannot re-use a name that is still in use");
	//   - previews and refreshes see each object, so a hand-edited Role or StatefulSet shows as drift and a pull
	//     request's preview shows what a values change does to the objects;
	//   - nothing is lost: vCluster v0.36.1's chart has no hooks (no helm.sh/hook annotation under
	//     https://github.com/loft-sh/vcluster/tree/v0.36.1/chart/templates), and its one `lookup` (templates/service.yaml,
	//     refusing a namespace that holds the vCluster Platform) is evaluated, since the provider renders with a
	//     server-side dry run (pulumi-kubernetes provider/pkg/provider/helm/v4/chart.go). Upgrades replace Helm's
	//     three-way merge with server-side apply, and objects a new chart version drops are deleted by the engine.
	chartArgs := a.Chart.ChartArgs(a.Tenant, a.Namespace)
	chartArgs.Values = vals
	// Awaiting waits on each object as the provider awaits it: the StatefulSet until its pods are ready, within the
	// provider's default of ten minutes (loft-sh/vcluster-terraform-modules gives a first start 600 s too).
	chartArgs.SkipAwait = pulumi.Bool(!a.Await)
	chart, err := helmv4.NewChart(ctx, name, chartArgs, pulumi.Parent(vc), pulumi.DependsOn(chartDeps))
	if err != nil {
		return nil, fmt.Errorf("creating virtual cluster chart %q: %w", a.Tenant, err)
	}

	secretName := KubeconfigSecretPrefix + a.Tenant
	vc.Chart = chart
	vc.KubeconfigSecretNamespace = a.Namespace.ToStringOutput()
	vc.KubeconfigSecretName = pulumi.String(secretName).ToStringOutput()
	vc.Kubeconfig = pulumi.ToSecret(pulumi.String("")).(pulumi.StringOutput)
	outputs := pulumi.Map{
		"kubeconfigSecretNamespace": vc.KubeconfigSecretNamespace,
		"kubeconfigSecretName":      vc.KubeconfigSecretName,
	}
	if a.Await && a.KubeconfigLost {
		// The program warned of it already (KubeconfigLost): nothing is read, and the tenant's kubeconfig output is empty.
		outputs["kubeconfig"] = vc.Kubeconfig
	} else if a.Await {
		server := pulumi.String(a.KubeconfigServer).ToStringOutput()
		if usesServiceIP(a.KubeconfigServer) {
			if server, err = serviceIPServer(ctx, name, chart, a.Namespace, a.Tenant, vc); err != nil {
				return nil, err
			}
		}
		if vc.Kubeconfig, err = readKubeconfig(ctx, name, chart, a.Namespace, secretName, server, a.Tenant, vc); err != nil {
			return nil, err
		}
		outputs["kubeconfig"] = vc.Kubeconfig
	}
	if err := ctx.RegisterResourceOutputs(vc, outputs); err != nil {
		return nil, fmt.Errorf("registering virtual cluster %q outputs: %w", name, err)
	}
	return vc, nil
}

// readKubeconfig reads the kubeconfig vCluster exported once the chart's objects are ready, rebuilt from its pinned
// parts (exportedKubeconfig). The Secret's id derives from the chart's list of objects, which resolves once every
// object is applied and awaited, so the read waits for them, and a preview of a new chart skips the read instead of
// failing on a Secret that does not exist yet. The tenant may rewrite the Secret (its syncer holds every verb on its
// namespace's Secrets): what it holds then is warned of and not exported, rather than failing the deployment and with
// it every other tenant's changes. It may not delete it (gpu-tenancy-kubeconfig-secret), since a read of a Secret that
// is not there fails the deployment.
func readKubeconfig(ctx *pulumi.Context, name string, chart *helmv4.Chart, namespace pulumi.StringInput,
	secretName string, server pulumi.StringOutput, tenant string, vc *VirtualCluster) (pulumi.StringOutput, error) {
	secret, err := corev1.GetSecret(ctx, name+"-kubeconfig", chartObjectID(chart, namespace, secretName), nil, pulumi.Parent(vc),
		pulumi.DependsOn([]pulumi.Resource{chart}), pulumi.AdditionalSecretOutputs([]string{"data"}))
	if err != nil {
		return pulumi.StringOutput{}, fmt.Errorf("reading virtual cluster kubeconfig Secret %q: %w", secretName, err)
	}
	config := pulumi.All(secret.Data, server).ApplyT(func(v []any) string {
		config, problem := exportedKubeconfig(v[0].(map[string]string), secretName, v[1].(string), tenant)
		if problem != "" {
			_ = ctx.Log.Warn(problem, &pulumi.LogArgs{Resource: vc})
		}
		return config
	}).(pulumi.StringOutput)
	return pulumi.ToSecret(config).(pulumi.StringOutput), nil
}

// chartObjectID is the id of an object of the chart in namespace, derived from the chart's list of objects so that a
// read of it waits for them (see readKubeconfig).
func chartObjectID(chart *helmv4.Chart, namespace pulumi.StringInput, name string) pulumi.IDOutput {
	return pulumi.All(chart.Resources, namespace).ApplyT(func(v []any) pulumi.ID {
		return pulumi.ID(fmt.Sprintf("%s/%s", v[1], name))
	}).(pulumi.IDOutput)
}

func usesServiceIP(server string) bool { return strings.Contains(server, ServiceIPPlaceholder) }

// serviceIPServer is https://<cluster IP> of the vCluster's Service (the chart names it after the release:
// loft-sh/vcluster v0.36.1 chart/templates/service.yaml), read once the chart's objects are applied.
func serviceIPServer(ctx *pulumi.Context, name string, chart *helmv4.Chart, namespace pulumi.StringInput, tenant string,
	vc *VirtualCluster) (pulumi.StringOutput, error) {
	svc, err := corev1.GetService(ctx, name+"-service", chartObjectID(chart, namespace, tenant), nil, pulumi.Parent(vc),
		pulumi.DependsOn([]pulumi.Resource{chart}))
	if err != nil {
		return pulumi.StringOutput{}, fmt.Errorf("reading virtual cluster Service %q: %w", tenant, err)
	}
	return svc.Spec.ClusterIP().ApplyT(func(ip *string) string {
		if ip == nil || *ip == "" || *ip == "None" {
			return ""
		}
		return "https://" + net.JoinHostPort(*ip, "443")
	}).(pulumi.StringOutput), nil
}
