package platform

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate checks the args as a whole, after defaults: the cloud, secrets and the references between blocks, and
// every component's own rules for the args it will be given, cluster contract included, so that nothing can fail on
// a rule once the first resource is registered. Every block's rules belong to the component it configures; Validate
// calls its Validate with the block's key path, so each error names its full path whichever layer finds it.
func (c *PlatformArgs) Validate() field.ErrorList {
	path := c.Keys.Path
	var errs field.ErrorList
	if e := fieldcheck.OneOf(path(keyCloud), string(c.Cloud), Clouds); e != nil {
		errs = append(errs, e)
	}
	switch c.Cloud {
	case cluster.GKE:
		errs = append(errs, c.GKE.Validate(path(keyGKE), path(keyGPUPools), c.today())...)
	case cluster.Scaleway:
		errs = append(errs, c.Scaleway.Validate(path(keyScaleway), path(keyGPUPools), c.today())...)
	case cluster.Existing:
		errs = append(errs, validateKubeconfigSource(c, path)...)
		errs = append(errs, c.Existing.Validate(path(keyExisting), path(keyGPUPools))...)
	}
	if c.Cloud != cluster.Existing && c.Existing.DriverRoot != "" {
		errs = append(errs, field.Forbidden(path(keyExisting).Child("driverRoot"),
			fmt.Sprintf("is not used on cloud %s (given %s)", c.Cloud, c.Existing.DriverRoot)))
	}
	if c.Cloud != cluster.Existing && len(c.Existing.PodCIDRs) > 0 {
		errs = append(errs, field.Forbidden(path(keyExisting).Child("podCIDRs"),
			fmt.Sprintf("is not used on cloud %s (given %s)", c.Cloud, strings.Join(c.Existing.PodCIDRs, ", "))))
	}
	errs = append(errs, tenancy.ValidateClasses(path(keyGPUClasses), c.GPUClasses)...)
	errs = append(errs, tenancy.ValidateClassOwners(path(keyGPUClasses), c.GPUClasses, c.Grants())...)
	errs = append(errs, validateClassesHavePools(c, path)...)
	errs = append(errs, validateTenants(c, path)...)
	errs = append(errs, validateGPUAccess(c, path)...)
	errs = append(errs, validateDedicatedPools(c, path)...)
	if c.DRAEnabled() {
		driver := c.driverArgs(c.GPUPools(), c.driverRoot())
		errs = append(errs, driver.Validate(path(keyDRADriver), path(keyGPUPools))...)
	}
	errs = append(errs, validateAccessKeys(c, path)...)
	if c.PlatformEnabled() {
		errs = append(errs, c.Platform.Validate(path(keyPlatform))...)
	}
	if c.PlatformInstalled() {
		if c.Secrets.PlatformAdminPassword == "" {
			errs = append(errs, field.Required(path(keyAdminPassword), fmt.Sprintf(
				"the vCluster Platform admin password, as a secret, while %s and %s are true (%s)",
				path(keyPlatform).Child("enabled"), path(keyPlatform).Child("install"), c.Keys.setSecret(keyAdminPassword, "", "<password>"))))
		}
	}
	errs = append(errs, c.VCluster.Validate(path(keyVCluster))...)
	errs = append(errs, c.Admission.Validate(path(keyAdmission), c.TenantNames())...)
	errs = append(errs, c.Monitoring.ValidateFor(path(keyMonitoring), c.Cloud)...)
	if c.Monitoring.EnabledFor(c.Cloud) {
		args := c.monitoringArgs()
		errs = append(errs, args.Validate(path(keyMonitoring))...)
	}
	errs = append(errs, validateWiringFields(c, path)...)
	errs = append(errs, validateParts(c, path)...)
	errs = append(errs, c.Ownership.Validate(path(keyOwnership))...)
	errs = append(errs, c.Timeouts.Validate(path(keyTimeouts))...)
	cloud, onCloud := cloudClusters[c.Cloud]
	rangeErrs := c.ServiceRange.Validate(path(keyServiceRange), onCloud)
	errs = append(errs, rangeErrs...)
	if onCloud && len(rangeErrs) == 0 {
		errs = append(errs, validateCloudServiceRoom(c, cloud.ranges)...)
	}
	errs = append(errs, c.Prices.Validate(path(keyPrices), c.ClassNames())...)
	return errs
}

// What this program includes, as variables so that a test can leave a cloud out of a program that includes every one.
var (
	builderOf               = cluster.BuilderOf
	alertPoliciesRegistered = monitoring.AlertPoliciesRegistered
)

// validateIncluded refuses, at the cloud key, a cloud this program cannot build: each cloud's SDK code is a package
// that registers itself (cluster.RegisterBuilder, monitoring.RegisterAlertPolicies), and a program includes only the
// clouds it imports. Only a part that builds the cluster and monitoring needs them. Load does not check it: a config
// is valid whichever program reads it.
func validateIncluded(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	buildsPlatform, _ := c.builds()
	if _, cloud := cloudClusters[c.Cloud]; !cloud || !buildsPlatform {
		return nil
	}
	var errs field.ErrorList
	if _, ok := builderOf(c.Cloud); !ok {
		errs = append(errs, cluster.NotIncluded(path(keyCloud), c.Cloud))
	}
	if c.Cloud == cluster.GKE && c.Monitoring.EnabledFor(c.Cloud) && !alertPoliciesRegistered() {
		errs = append(errs, monitoring.AlertPoliciesNotIncluded(path(keyCloud)))
	}
	return errs
}

// validateWiringFields refuses, from a Go caller, the fields of the components' args that the Platform sets itself
// (from the cluster contract, the secrets, the catalog): a value there would be overwritten, or half used.
func validateWiringFields(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	set := func(p *field.Path, isSet bool, from string) {
		if isSet {
			errs = append(errs, field.Forbidden(p, "is set by the Platform ("+from+"): leave it empty"))
		}
	}
	driver := path(keyDRADriver)
	set(driver.Child("Namespace"), c.DRADriver.Namespace != "", "the driver's namespace is "+dra.DefaultNamespace)
	set(driver.Child("Flavour"), c.DRADriver.Flavour != "", "from cloud")
	set(driver.Child("GPUPools"), c.DRADriver.GPUPools != nil, "from gpuPools")
	set(driver.Child("DriverRoot"), c.DRADriver.DriverRoot != "", "from the cluster, or existing.driverRoot")
	platform := path(keyPlatform)
	set(platform.Child("Namespace"), c.Platform.Namespace != "", "the platform's namespace is "+vcluster.DefaultPlatformNamespace)
	set(platform.Child("AdminPassword"), c.Platform.AdminPassword != nil, "from Secrets.PlatformAdminPassword")
	set(platform.Child("LicenseToken"), c.Platform.LicenseToken != nil, "from Secrets.PlatformLicenseToken")
	set(path(keyExisting).Child("Kubeconfig"), c.Existing.Kubeconfig != nil, "from Secrets.Kubeconfig or existing.kubeconfigPath")
	for i, t := range c.Tenants {
		set(path(keyTenants).Index(i).Child("Catalog"), t.Catalog != nil, "the platform's own catalog")
		set(path(keyTenants).Index(i).Child("Network"), !reflect.ValueOf(t.Network).IsZero(), "from the cluster and the platform")
	}
	return errs
}

// validateAccessKeys checks that each platform access key belongs to a tenant whose vCluster connects to the
// platform: a key for no one is a typo, or a leftover of a removed tenant.
func validateAccessKeys(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	tenants := c.TenantNames()
	for _, tenant := range sortedKeys(c.Secrets.PlatformAccessKeys) {
		p := path(keyAccessKeys).Key(tenant)
		switch {
		case !slices.Contains(tenants, tenant):
			errs = append(errs, field.NotSupported(p, tenant, tenants))
		case !c.PlatformEnabled() || !c.VCluster.IsEnabled():
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"tenants connect to the platform only while %s and %s are true", path(keyPlatform).Child("enabled"), path(keyVCluster).Child("enabled"))))
		case !c.GPUAccessOf(c.tenant(tenant)).SyncsClaims():
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("tenant %s gets GPUs as extended resources only (gpuAccess %s): "+
				"its vCluster runs the open-source syncer, which connects to no platform", tenant, vcluster.ExtendedResources)))
		case c.Secrets.PlatformAccessKeys[tenant] == "":
			errs = append(errs, field.Required(p, "the tenant's access key"))
		}
	}
	return errs
}

// validateGPUAccess checks each tenant's gpuAccess, and that a cloud cluster's Kubernetes version serves extended
// resources to every tenant that asks for its classes by name: an older API server drops a DeviceClass's
// extendedResourceName without a word, and the tenant's pods would wait for a resource no node has. An existing
// cluster's version is not in the config.
func validateGPUAccess(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	versionKey, version := c.kubernetesVersion(path)
	for i, t := range c.Tenants {
		tp := path(keyTenants).Index(i).Child("gpuAccess")
		if e := t.GPUAccess.Validate(tp); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		mode := c.GPUAccessOf(t)
		if versionKey == nil || !mode.NamesClasses() {
			continue
		}
		if minor, ok := cluster.MinorOf(version); ok && minor < cluster.ExtendedResourcesMinor {
			errs = append(errs, field.Invalid(c.gpuAccessKey(i), string(mode), fmt.Sprintf(
				"tenant %s asks for GPUs as extended resources, which need Kubernetes 1.%d or later (DRAExtendedResource, on by "+
					"default from 1.%d); %s is %s: raise it, or set %s to %s", t.Name, cluster.ExtendedResourcesMinor,
				cluster.ExtendedResourcesMinor, versionKey, version, path(keyTenants).Index(i).Child("gpuAccess"), vcluster.ClaimSync)))
		}
	}
	return errs
}

// gpuAccessKey is the key that sets tenant i's gpuAccess: its own, or vcluster.gpuAccess when it sets none.
func (c *PlatformArgs) gpuAccessKey(i int) *field.Path {
	if c.Tenants[i].GPUAccess == "" {
		return c.Keys.Path(keyVCluster).Child("gpuAccess")
	}
	return c.Keys.Path(keyTenants).Index(i).Child("gpuAccess")
}

// firstNamingTenant is the index of the first tenant that asks for GPUs by name; -1 when none does.
func (c *PlatformArgs) firstNamingTenant() int {
	for i, t := range c.Tenants {
		if c.GPUAccessOf(t).NamesClasses() {
			return i
		}
	}
	return -1
}

// kubernetesVersion is a cloud cluster's Kubernetes version (after defaults) and its key; nil for an existing cluster.
func (c *PlatformArgs) kubernetesVersion(path func(string) *field.Path) (*field.Path, string) {
	switch c.Cloud {
	case cluster.GKE:
		return path(keyGKE).Child("kubernetesVersion"), c.GKE.KubernetesVersion
	case cluster.Scaleway:
		return path(keyScaleway).Child("kubernetesVersion"), c.Scaleway.KubernetesVersion
	}
	return nil, ""
}

// validateKubeconfigSource checks that an existing cluster's kubeconfig is given exactly once: a file, or a secret.
func validateKubeconfigSource(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	p := path(keyExisting).Child("kubeconfigPath")
	hasSecret, hasPath := c.Secrets.Kubeconfig != "", c.Existing.KubeconfigPath != ""
	switch {
	case !hasSecret && !hasPath:
		return field.ErrorList{field.Required(p, fmt.Sprintf(
			"a kubeconfig: a file path here, or the secret %s", path(keyKubeconfig)))}
	case hasSecret && hasPath:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"give the kubeconfig once: either this path or the secret %s", path(keyKubeconfig)))}
	}
	return nil
}

// validateClassesHavePools refuses a class no GPU pool can satisfy: its DeviceClass would match nothing.
func validateClassesHavePools(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	pools := c.GPUPools()
	for i, class := range c.GPUClasses {
		if !slices.Contains(tenancy.DeviceKinds, string(class.Device)) || class.Device == tenancy.MIG && class.MIGProfile == "" {
			continue // the class's own error says why
		}
		if !slices.ContainsFunc(pools, class.SelectsFrom) {
			errs = append(errs, field.Invalid(path(keyGPUClasses).Index(i), class.Name, fmt.Sprintf(
				"no GPU pool in %s can satisfy it: %s", path(keyGPUPools), class.Describe())))
		}
	}
	return errs
}

// validateDedicatedPools refuses a pool dedicated to a tenant the config does not have, and a class granted to a tenant
// with pools of its own that none of them can satisfy: that tenant's pods run on its own pools only.
func validateDedicatedPools(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := c.TenantNames()
	for i, spec := range c.poolSpecs() {
		if spec.Tenant != "" && !slices.Contains(names, spec.Tenant) {
			errs = append(errs, field.NotSupported(path(keyGPUPools).Index(i).Child("tenant"), spec.Tenant, names))
		}
	}
	pools := c.GPUPools()
	for i, t := range c.Tenants {
		var own []string
		for _, p := range pools {
			if p.Tenant == t.Name {
				own = append(own, p.Name)
			}
		}
		if len(own) == 0 {
			continue
		}
		for j, name := range t.Classes {
			k := slices.IndexFunc(c.GPUClasses, func(g tenancy.GPUClass) bool { return g.Name == name })
			if k < 0 {
				continue // the grant's own error says why
			}
			class := c.GPUClasses[k]
			if !slices.ContainsFunc(pools, func(p cluster.GPUPool) bool { return p.Tenant == t.Name && class.SelectsFrom(p) }) {
				errs = append(errs, field.Invalid(path(keyTenants).Index(i).Child("classes").Index(j), name, fmt.Sprintf(
					"tenant %s runs on its own pools only (%s), and none of them can satisfy it: %s",
					t.Name, strings.Join(own, ", "), class.Describe())))
			}
		}
	}
	return errs
}

// validateTenants checks each tenant with its component's rules, its grant against the catalog and, when tenants
// get a vCluster, the vCluster's rules for its name and size.
func validateTenants(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := make([]string, len(c.Tenants))
	// The platform team's own namespaces (admission.platformNamespaces) cannot be a tenant's: the admission settings'
	// validation refuses any of them with the tenant namespaces' prefix.
	controllerNamespaces := c.Admission.WithDefaults().ControllerNamespaces
	for i, t := range c.Tenants {
		tp := path(keyTenants).Index(i)
		names[i] = t.Name
		nameErrs := tenancy.ValidateTenantName(tp.Child("name"), t.Name)
		// The guards pass over the service accounts of the platform's controllers' namespaces, so a tenant in one would
		// hold a platform controller's rights on cluster-scoped objects (PriorityClasses among them).
		if ns := naming.Namespace(t.Name); slices.Contains(controllerNamespaces, ns) {
			errs = append(errs, field.Invalid(tp.Child("name"), t.Name, fmt.Sprintf("its namespace %s is one of the platform's own (%s), "+
				"whose service accounts the guards do not hold to a tenant's rules", ns, strings.Join(controllerNamespaces, ", "))))
		}
		errs = append(errs, t.TenantArgs.Validate(tp)...)
		errs = append(errs, tenancy.ValidateGrant(tp.Child("classes"), t.Classes, c.GPUClasses)...)
		if c.VCluster.IsEnabled() {
			if len(nameErrs) == 0 {
				errs = append(errs, vcluster.ValidateReleaseName(tp.Child("name"), t.Name)...)
			}
			errs = append(errs, t.VCluster.Validate(tp.Child("vcluster"))...)
		}
	}
	errs = append(errs, fieldcheck.UniqueNames(path(keyTenants), names)...)
	for i, name := range c.RetiredTenants {
		rp := path(keyRetired).Index(i)
		errs = append(errs, tenancy.ValidateTenantName(rp, name)...)
		switch {
		case slices.Contains(names, name):
			errs = append(errs, field.Invalid(rp, name, fmt.Sprintf("tenant %s is listed in %s too: a retired tenant is "+
				"deleted, so keep it in one of them", name, path(keyTenants))))
		case slices.Contains(c.RetiredTenants[:i], name):
			errs = append(errs, field.Duplicate(rp, name))
		}
	}
	return errs
}
