package pipeline

import (
	"fmt"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/fieldcheck"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validate checks the config as a whole: the cloud, secrets and the references between blocks. Every block's own
// rules belong to the component it configures; validate calls its Validate with the block's config path, so each
// error names its full key path whichever layer finds it.
func validate(c *Config) field.ErrorList {
	var errs field.ErrorList
	if e := fieldcheck.OneOf(path(keyCloud), string(c.Cloud), Clouds); e != nil {
		errs = append(errs, e)
	}
	switch c.Cloud {
	case cluster.GKE:
		errs = append(errs, c.GKE.Validate(path(keyGKE), path(keyGPUPools))...)
	case cluster.Scaleway:
		errs = append(errs, c.Scaleway.Validate(path(keyScaleway), path(keyGPUPools))...)
	case cluster.Existing:
		errs = append(errs, validateKubeconfigSource(c)...)
		errs = append(errs, c.Existing.Validate(path(keyGPUPools))...)
	}
	if c.Cloud != cluster.Existing && c.Existing.DriverRoot != "" {
		errs = append(errs, field.Forbidden(path(keyExisting).Child("driverRoot"),
			fmt.Sprintf("is not used on cloud %s (given %s)", c.Cloud, c.Existing.DriverRoot)))
	}
	errs = append(errs, tenancy.ValidateClasses(path(keyGPUClasses), c.GPUClasses)...)
	errs = append(errs, tenancy.ValidateClassOwners(path(keyGPUClasses), c.GPUClasses, c.Grants())...)
	errs = append(errs, validateClassesHavePools(c)...)
	errs = append(errs, validateTenants(c)...)
	errs = append(errs, c.DRADriver.Validate(path(keyDRADriver))...)
	errs = append(errs, validateAccessKeys(c)...)
	if c.PlatformEnabled() {
		errs = append(errs, c.Platform.Validate(path(keyPlatform))...)
	}
	if c.PlatformInstalled() {
		if c.Secrets.PlatformAdminPassword == "" {
			errs = append(errs, field.Required(path(keyAdminPassword), fmt.Sprintf(
				"the vCluster Platform admin password while %s:platform.enabled is true: pulumi config set --secret %s:%s <password>",
				Namespace, Namespace, keyAdminPassword)))
		}
	}
	errs = append(errs, c.VCluster.Validate(path(keyVCluster))...)
	errs = append(errs, c.Admission.Validate(path(keyAdmission), c.TenantNames())...)
	errs = append(errs, c.Monitoring.ValidateFor(path(keyMonitoring), c.Cloud)...)
	errs = append(errs, c.Ownership.Validate(path(keyOwnership))...)
	errs = append(errs, c.Timeouts.Validate(path(keyTimeouts))...)
	errs = append(errs, c.Prices.Validate(path(keyPrices), c.ClassNames())...)
	return errs
}

// validateAccessKeys checks that each platform access key belongs to a tenant whose vCluster connects to the
// platform: a key for no one is a typo, or a leftover of a removed tenant.
func validateAccessKeys(c *Config) field.ErrorList {
	var errs field.ErrorList
	tenants := c.TenantNames()
	for _, tenant := range sortedKeys(c.Secrets.PlatformAccessKeys) {
		p := path(keyAccessKeys).Key(tenant)
		switch {
		case !slices.Contains(tenants, tenant):
			errs = append(errs, field.NotSupported(p, tenant, tenants))
		case !c.PlatformEnabled() || !c.VCluster.IsEnabled():
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"tenants connect to the platform only while %s:platform.enabled and %s:vcluster.enabled are true", Namespace, Namespace)))
		case c.Secrets.PlatformAccessKeys[tenant] == "":
			errs = append(errs, field.Required(p, "the tenant's access key"))
		}
	}
	return errs
}

// validateKubeconfigSource checks that an existing cluster's kubeconfig is given exactly once: a file, or a secret.
func validateKubeconfigSource(c *Config) field.ErrorList {
	p := path(keyExisting).Child("kubeconfigPath")
	hasSecret, hasPath := c.Secrets.Kubeconfig != "", c.Existing.KubeconfigPath != ""
	switch {
	case !hasSecret && !hasPath:
		return field.ErrorList{field.Required(p, fmt.Sprintf(
			"a kubeconfig: a file path here, or the secret %s:%s", Namespace, keyKubeconfig))}
	case hasSecret && hasPath:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf(
			"give the kubeconfig once: either this path or the secret %s:%s", Namespace, keyKubeconfig))}
	}
	return nil
}

// validateClassesHavePools refuses a class no GPU pool can satisfy: its DeviceClass would match nothing.
func validateClassesHavePools(c *Config) field.ErrorList {
	var errs field.ErrorList
	pools := c.GPUPools()
	for i, class := range c.GPUClasses {
		if !slices.Contains(tenancy.DeviceKinds, string(class.Device)) || class.Device == tenancy.MIG && class.MIGProfile == "" {
			continue // the class's own error says why
		}
		if !slices.ContainsFunc(pools, class.SelectsFrom) {
			errs = append(errs, field.Invalid(path(keyGPUClasses).Index(i), class.Name, fmt.Sprintf(
				"no GPU pool in %s:%s can satisfy it: %s", Namespace, keyGPUPools, class.Describe())))
		}
	}
	return errs
}

// validateTenants checks each tenant with its component's rules, its grant against the catalog and, when tenants
// get a vCluster, the vCluster's rules for its name and size.
func validateTenants(c *Config) field.ErrorList {
	var errs field.ErrorList
	names := make([]string, len(c.Tenants))
	for i, t := range c.Tenants {
		tp := path(keyTenants).Index(i)
		names[i] = t.Name
		nameErrs := tenancy.ValidateTenantName(tp.Child("name"), t.Name)
		errs = append(errs, t.TenantArgs.Validate(tp)...)
		errs = append(errs, tenancy.ValidateGrant(tp.Child("classes"), t.Classes, c.GPUClasses)...)
		if c.VCluster.IsEnabled() {
			if len(nameErrs) == 0 {
				errs = append(errs, vcluster.ValidateReleaseName(tp.Child("name"), t.Name)...)
			}
			errs = append(errs, t.VCluster.Validate(tp.Child("vcluster"))...)
		}
	}
	return append(errs, fieldcheck.UniqueNames(path(keyTenants), names)...)
}
