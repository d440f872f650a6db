package vcluster

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// GPUAccess is how a tenant's GPUs reach it through its vCluster.
type GPUAccess string

const (
	// ClaimSync: the tenant writes ResourceClaims inside its vCluster and sees its classes there as DeviceClasses;
	// vCluster's DRA sync copies both ways. That sync is closed Pro code: it needs a licensed Pro build, vCluster
	// Platform and each vCluster's access key (loft-sh/vcluster v0.36.1 config/config.go IsProFeatureEnabled). The
	// default, and what every stack did before the mode existed.
	ClaimSync GPUAccess = "claims"
	// ExtendedResources: the tenant asks for its classes by their extended-resource names, as counts in a container's
	// resources, and the host scheduler gives the pod a device of the class and makes its claim (KEP-5004, beta and on
	// by default from Kubernetes 1.36). vCluster's open-source pod sync copies a container's resources to the host
	// unchanged (loft-sh/vcluster v0.36.1 pkg/controllers/resources/pods/translate/translator.go), so the vCluster
	// runs the open-source build, with no Pro setting, no Platform connection and no access key.
	ExtendedResources GPUAccess = "extendedResources"
	// BothAccess: claims through the Pro sync and extended resources, for a tenant moving from one to the other.
	BothAccess GPUAccess = "both"
)

// GPUAccessModes are the values of vcluster.gpuAccess and tenants[].gpuAccess.
var GPUAccessModes = []string{string(ClaimSync), string(ExtendedResources), string(BothAccess)}

// Or is the mode, or fallback when it is unset.
func (m GPUAccess) Or(fallback GPUAccess) GPUAccess {
	if m == "" {
		return fallback
	}
	return m
}

// SyncsClaims says whether the vCluster syncs claims and DeviceClasses (the Pro sync); unset means ClaimSync.
func (m GPUAccess) SyncsClaims() bool { return m != ExtendedResources }

// NamesClasses says whether the tenant asks for its classes by extended-resource name.
func (m GPUAccess) NamesClasses() bool { return m == ExtendedResources || m == BothAccess }

// Validate refuses a value that is not a mode; unset is allowed (the platform default, or ClaimSync).
func (m GPUAccess) Validate(path *field.Path) field.ErrorList {
	if m == "" {
		return nil
	}
	if e := fieldcheck.OneOf(path, string(m), GPUAccessModes); e != nil {
		return field.ErrorList{e}
	}
	return nil
}
