// Package platform is the whole product as one Pulumi component, Platform (gpu-tenancy:index:Platform): a cloud
// cluster with GPU pools (GKE, Scaleway Kapsule, or an existing cluster), the NVIDIA DRA driver, vCluster Platform, the
// GPU catalog and per tenant its host-side guard rails and its vCluster. Its args are the documented config
// (docs/installation-configuration.md, "Config reference"): a stack's config decodes into them (Load), and so do a component provider's properties.
// NewPlatform validates the complete args, every component's rules at once with their key paths, before it registers
// anything, and then wires cluster -> driver -> platform -> catalog -> tenants.
package platform

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/gke"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/components/scaleway"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
)

// ConfigNamespace is the stack config namespace: every key is `gpu-tenancy:<key>`.
const ConfigNamespace = "gpu-tenancy"

// Top-level keys: stack config keys without the namespace, and the component's property names. Keys holding secrets
// are read only as Pulumi secrets.
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
	keyServiceRange  = "serviceRange"
	keyPrices        = "prices"
	keyAdminPassword = "platformAdminPassword"
	keyLicenseToken  = "platformLicenseToken"
	keyAccessKey     = "platformAccessKey"
	keyAccessKeys    = "platformAccessKeys"
	keyTenantGroups  = "tenantGroups"
	keyRetired       = "retiredTenants"
)

// knownKeys are every key the decoder reads: the properties, and the refused shared platform access key.
var knownKeys = func() []string {
	keys := []string{keyAccessKey}
	for _, p := range Properties() {
		keys = append(keys, p.Name)
	}
	return keys
}()

// blocks are the structured keys, each decoded straight into its field of the args.
var blocks = []struct {
	key   string
	field func(*PlatformArgs) any
}{
	{keyGKE, func(c *PlatformArgs) any { return &c.GKE }},
	{keyScaleway, func(c *PlatformArgs) any { return &c.Scaleway }},
	{keyExisting, func(c *PlatformArgs) any { return &c.Existing }},
	{keyGPUClasses, func(c *PlatformArgs) any { return &c.GPUClasses }},
	{keyTenants, func(c *PlatformArgs) any { return &c.Tenants }},
	{keyDRADriver, func(c *PlatformArgs) any { return &c.DRADriver }},
	{keyPlatform, func(c *PlatformArgs) any { return &c.Platform }},
	{keyVCluster, func(c *PlatformArgs) any { return &c.VCluster }},
	{keyAdmission, func(c *PlatformArgs) any { return &c.Admission }},
	{keyMonitoring, func(c *PlatformArgs) any { return &c.Monitoring }},
	{keyOwnership, func(c *PlatformArgs) any { return &c.Ownership }},
	{keyTimeouts, func(c *PlatformArgs) any { return &c.Timeouts }},
	{keyServiceRange, func(c *PlatformArgs) any { return &c.ServiceRange }},
	{keyPrices, func(c *PlatformArgs) any { return &c.Prices }},
	{keyTenantGroups, func(c *PlatformArgs) any { return &c.TenantGroups }},
	{keyRetired, func(c *PlatformArgs) any { return &c.RetiredTenants }},
}

// secretStrings are the keys holding one secret string each.
var secretStrings = []struct {
	key   string
	field func(*PlatformArgs) *Secret
}{
	{keyKubeconfig, func(c *PlatformArgs) *Secret { return &c.Secrets.Kubeconfig }},
	{keyAdminPassword, func(c *PlatformArgs) *Secret { return &c.Secrets.PlatformAdminPassword }},
	{keyLicenseToken, func(c *PlatformArgs) *Secret { return &c.Secrets.PlatformLicenseToken }},
}

// Property is a top-level key as the component's property: the Go types its value decodes into (one for each cloud
// for gpuPools, whose fields depend on the cloud) and whether it is a secret.
type Property struct {
	Name   string
	Types  []reflect.Type
	Secret bool
}

// Properties are the args' top-level keys, as a schema describes them; the refused platformAccessKey is left out.
func Properties() []Property {
	props := []Property{{Name: keyCloud, Types: []reflect.Type{reflect.TypeFor[string]()}}}
	for _, b := range blocks {
		props = append(props, Property{Name: b.key, Types: []reflect.Type{reflect.TypeOf(b.field(&PlatformArgs{})).Elem()}})
	}
	pools := Property{Name: keyGPUPools}
	for _, cloud := range Clouds {
		pools.Types = append(pools.Types, reflect.SliceOf(poolTypes[cluster.Flavour(cloud)]))
	}
	props = append(props, pools)
	for _, s := range secretStrings {
		props = append(props, Property{Name: s.key, Types: []reflect.Type{reflect.TypeFor[string]()}, Secret: true})
	}
	return append(props, Property{Name: keyAccessKeys, Types: []reflect.Type{reflect.TypeFor[map[string]string]()}, Secret: true})
}

// Clouds are the values of the cloud key.
var Clouds = cluster.Flavours

// PlatformArgs are the whole platform: the documented config, decoded. Each block decodes straight into the spec of
// the component that uses it; the gpuPools key decodes into the chosen cloud's pool specs (GKE.GPUPools,
// Scaleway.GPUPools, Existing.GPUPools).
type PlatformArgs struct {
	Cloud      cluster.Flavour
	GKE        gke.ClusterArgs
	Scaleway   scaleway.ClusterArgs
	Existing   cluster.ExistingArgs
	GPUClasses []tenancy.GPUClass
	Tenants    []TenantArgs
	DRADriver  DRADriverArgs
	Platform   VClusterPlatformArgs
	VCluster   vcluster.Settings
	Admission  tenancy.AdmissionArgs
	Monitoring monitoring.Spec
	Ownership  OwnershipArgs
	Timeouts   cluster.Timeouts
	// ServiceRange weighs the tenants' Service quotas against the cluster's Service range.
	ServiceRange ServiceRangeArgs
	Prices       rules.Prices
	Secrets      Secrets
	// TenantGroups splits the environment into a platform stack and this many tenant stacks (0: one stack), each
	// tenant in the group TenantGroup names.
	TenantGroups int
	// RetiredTenants are the tenants to delete, with their namespaces, volumes and vClusters: a tenant leaves the
	// environment only by being named here, never because its entry is gone from Tenants (the runner refuses that).
	RetiredTenants []string
	// part is what this stack of the environment builds; NewPlatform takes it from the stack's name (PartOf).
	part Part
	// live are the groups whose stacks hold tenants' namespaces on the cluster (LiveGroups), which place the tenants
	// whose config records no group.
	live map[string]int
	// lostKubeconfigs are the tenants whose running vCluster's kubeconfig Secret is gone (liveCluster.lostKubeconfigs):
	// their vClusters are not read this time.
	lostKubeconfigs map[string]bool
	// liveServiceAddresses is the size of an existing cluster's Service range, as this run's check read it
	// (checkServiceRoom); zero when it did not.
	liveServiceAddresses int64
	// now is the day the cloud's Kubernetes version is checked against its end of support; zero is today (tests pin
	// it).
	now time.Time

	// BaseDir is where relative paths of the args (local charts, the existing cluster's kubeconfig file) are taken
	// from; empty takes the program's root directory.
	BaseDir string
	// Keys says how errors name the keys: as properties (tenants[0].name) when zero; Load sets the ones it decoded
	// with, so a stack's errors name `gpu-tenancy:tenants[0].name` whichever validation finds them.
	Keys Keys
}

// today is the day versions are checked against the clouds' ends of support: now, or the day a test pinned.
func (c *PlatformArgs) today() time.Time {
	if c.now.IsZero() {
		return time.Now()
	}
	return c.now
}

// TenantArgs are one entry of the tenants key: the tenant's host-side settings, the size of its vCluster, and in an
// environment with tenant groups the group whose stack holds it.
type TenantArgs struct {
	tenancy.TenantArgs
	VCluster vcluster.ControlPlane `json:"vcluster"`
	// GPUAccess is how the tenant's GPUs reach it; unset takes vcluster.gpuAccess (GPUAccessOf).
	GPUAccess vcluster.GPUAccess `json:"gpuAccess"`
	// Group records the tenant group whose stack holds the tenant (tenantGroups); unset, the tenant stays where its
	// namespace is, and a new tenant goes where TenantGroup hashes it.
	Group *int `json:"group"`
}

// DRADriverArgs are the draDriver key.
type DRADriverArgs struct {
	// Enabled installs the NVIDIA DRA driver (default true).
	Enabled *bool `json:"enabled"`
	dra.DriverArgs
}

// VClusterPlatformArgs are the platform key; its admin password and license token are separate secret keys.
type VClusterPlatformArgs struct {
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
func (c *PlatformArgs) DRAEnabled() bool { return enabled(c.DRADriver.Enabled) }

// PlatformEnabled reports whether tenants connect to vCluster Platform.
func (c *PlatformArgs) PlatformEnabled() bool { return enabled(c.Platform.Enabled) }

// PlatformInstalled reports whether this stack installs vCluster Platform.
func (c *PlatformArgs) PlatformInstalled() bool {
	return c.PlatformEnabled() && enabled(c.Platform.Install)
}

// Grants maps each tenant to its granted classes, as the catalog labels them.
func (c *PlatformArgs) Grants() map[string][]string {
	grants := map[string][]string{}
	for _, t := range c.Tenants {
		grants[t.Name] = t.Classes
	}
	return grants
}

// GPUAccessOf is how a tenant's GPUs reach it: its own gpuAccess, else vcluster.gpuAccess, else claims.
func (c *PlatformArgs) GPUAccessOf(t TenantArgs) vcluster.GPUAccess {
	return t.GPUAccess.Or(c.VCluster.GPUAccess).Or(vcluster.ClaimSync)
}

// tenant is the tenant of that name; the zero tenant when there is none.
func (c *PlatformArgs) tenant(name string) TenantArgs {
	for _, t := range c.Tenants {
		if t.Name == name {
			return t
		}
	}
	return TenantArgs{}
}

// namedClasses maps each class whose DeviceClass carries its extended-resource name to that name: the classes
// granted to a tenant that asks for GPUs by name. One pass over the tenants, so callers compute it once per program.
func (c *PlatformArgs) namedClasses() map[string]string {
	asked := map[string]bool{}
	for _, t := range c.Tenants {
		if c.GPUAccessOf(t).NamesClasses() {
			for _, class := range t.Classes {
				asked[class] = true
			}
		}
	}
	named := map[string]string{}
	for _, class := range c.GPUClasses {
		if asked[class.Name] {
			named[class.Name] = class.ResourceName()
		}
	}
	return named
}

// ExtendedResourceClasses are the classes whose DeviceClass carries its extended-resource name (namedClasses), in
// catalog order.
func (c *PlatformArgs) ExtendedResourceClasses() []string {
	named := c.namedClasses()
	var out []string
	for _, class := range c.GPUClasses {
		if _, ok := named[class.Name]; ok {
			out = append(out, class.Name)
		}
	}
	return out
}

// extendedResourceNames are the names, by class, of a tenant's granted classes among named (namedClasses): a tenant
// granted such a class is capped on its name whatever its own mode, since the name's guard reads the grant.
func extendedResourceNames(t TenantArgs, named map[string]string) map[string]string {
	out := map[string]string{}
	for _, class := range t.Classes {
		if name, ok := named[class]; ok {
			out[class] = name
		}
	}
	return out
}

// offeredClasses are the classes a tenant may ask for by name (its ExtendedResourceNames), as it reads them inside
// its vCluster, in catalog order: each with what one device is, from the models of the pools that offer it, and the
// tenant's quota of it.
func (c *PlatformArgs) offeredClasses(t TenantArgs) []vcluster.OfferedClass {
	var out []vcluster.OfferedClass
	for _, class := range c.GPUClasses {
		name, ok := t.ExtendedResourceNames[class.Name]
		if !ok {
			continue
		}
		var models []string
		for _, p := range c.GPUPools() {
			if class.SelectsFrom(p) && !slices.Contains(models, p.Model.ProductName) {
				models = append(models, p.Model.ProductName)
			}
		}
		gives := "a whole " + strings.Join(models, " or a whole ")
		if class.Device == tenancy.MIG {
			gives = "a MIG " + class.MIGProfile + " slice of a " + strings.Join(models, " or of a ")
		}
		out = append(out, vcluster.OfferedClass{Class: class.Name, ResourceName: name, Gives: gives, Quota: t.GPUQuota[class.Name]})
	}
	return out
}

// TenantNames lists the tenants in config order.
func (c *PlatformArgs) TenantNames() []string {
	names := make([]string, len(c.Tenants))
	for i, t := range c.Tenants {
		names[i] = t.Name
	}
	return names
}

// ClassNames lists the GPU classes in config order.
func (c *PlatformArgs) ClassNames() []string {
	names := make([]string, len(c.GPUClasses))
	for i, class := range c.GPUClasses {
		names[i] = class.Name
	}
	return names
}

// GPUPools is what the chosen cloud's pools offer, built by that cloud's own contract function; pools with an
// unknown model are left out (validation reports them).
func (c *PlatformArgs) GPUPools() []cluster.GPUPool {
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

// poolSpecs are the chosen cloud's pools as config gives them, in config order, each as what every flavour's pool has
// in common.
func (c *PlatformArgs) poolSpecs() []cluster.PoolSpec {
	var out []cluster.PoolSpec
	switch c.Cloud {
	case cluster.GKE:
		for _, p := range c.GKE.GPUPools {
			out = append(out, p.PoolSpec)
		}
	case cluster.Scaleway:
		for _, p := range c.Scaleway.GPUPools {
			out = append(out, p.PoolSpec)
		}
	case cluster.Existing:
		for _, p := range c.Existing.GPUPools {
			out = append(out, p.PoolSpec)
		}
	}
	return out
}

// WithDefaults returns the args with what they leave out filled in, with each component's documented defaults. It is
// the one place defaults are applied: the stack config loader and NewPlatform both call it, and it is idempotent.
func (c PlatformArgs) WithDefaults() PlatformArgs {
	c.GKE = c.GKE.WithDefaults()
	c.Scaleway = c.Scaleway.WithDefaults()
	c.Tenants = slices.Clone(c.Tenants)
	for i := range c.Tenants {
		t := &c.Tenants[i]
		t.TenantArgs = t.TenantArgs.WithDefaults()
		t.VCluster = t.VCluster.WithDefaults()
	}
	c.VCluster = c.VCluster.WithDefaults()
	c.Admission = c.Admission.WithDefaults()
	return c
}
