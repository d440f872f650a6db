package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// deviceClassTypes are the DeviceClass resources of pulumi-kubernetes (sdk v4.32.0 go/kubernetes/resource/{v1,
// v1beta1,v1beta2}/deviceClass.go); the program creates resource.k8s.io/v1 ones, and a DeviceClass of an older
// version is the same object on the API server.
var deviceClassTypes = []string{
	"kubernetes:resource.k8s.io/v1:DeviceClass",
	"kubernetes:resource.k8s.io/v1beta1:DeviceClass",
	"kubernetes:resource.k8s.io/v1beta2:DeviceClass",
}

// classOwners is what a DeviceClass's labels say about who owns it.
type classOwners struct {
	// Tenants are the tenants granted the class (labels tenant.gpu-tenancy.io/<tenant>: "true"), sorted.
	Tenants []string
	// PlatformOnly is set by gpu-tenancy.io/platform-only: "true".
	PlatformOnly bool
	// Unknown is set when a label value that could change the answer is not known yet, or the labels as a whole.
	Unknown bool
}

// deviceClassOwners reads a DeviceClass's grant labels.
func deviceClassOwners(r resource) classOwners {
	labels, known := lookup(r.Props, "metadata", "labels")
	if !known {
		return classOwners{Unknown: true}
	}
	var o classOwners
	m := entries(labels)
	for _, key := range slices.Sorted(maps.Keys(m)) {
		value := m[key]
		tenant, isGrant := strings.CutPrefix(key, naming.ClassTenantLabelPrefix)
		switch {
		case !isGrant && key != naming.PlatformOnlyLabel:
		case value.IsComputed():
			o.Unknown = true
		case !isString(value, "true"):
		case isGrant:
			o.Tenants = append(o.Tenants, tenant)
		default:
			o.PlatformOnly = true
		}
	}
	return o
}

// className is a DeviceClass's metadata.name for messages, or its resource name when that is not known.
func className(r resource) string {
	v, _ := lookup(r.Props, "metadata", "name")
	if name, ok := str(v); ok && name != "" {
		return name
	}
	return r.Name
}

// checkDeviceClassOwner: every DeviceClass is granted to at least one tenant or marked platform-only, never both.
// A class with neither is nobody's: no tenant's vCluster syncs it and nothing says whether the platform's namespaces
// may use it; one with both is at once a tenant's and the platform's. components/tenancy ValidateClassOwners holds the
// same rule for the stack config's catalog; this holds it for every DeviceClass the program registers.
func checkDeviceClassOwner(r resource) []violation {
	if !slices.Contains(deviceClassTypes, r.Type) {
		return nil
	}
	o := deviceClassOwners(r)
	what := fmt.Sprintf("DeviceClass %s (resource %s)", className(r), r.Name)
	switch {
	case o.PlatformOnly && len(o.Tenants) > 0:
		return []violation{{URN: r.URN, Message: fmt.Sprintf(
			"%s is granted to tenant %s and also labelled %s=true: a platform-only class is granted to no tenant; "+
				"remove the grant (the tenants' classes in the stack config) or the platformOnly mark",
			what, strings.Join(o.Tenants, ", "), naming.PlatformOnlyLabel)}}
	case !o.PlatformOnly && len(o.Tenants) == 0 && !o.Unknown:
		return []violation{{URN: r.URN, Message: fmt.Sprintf(
			"%s carries no owner label: grant it to a tenant (label %s<tenant>=true, from tenants[].classes in the "+
				"stack config) or mark it platform-only (label %s=true, platformOnly: true in the catalog)",
			what, naming.ClassTenantLabelPrefix, naming.PlatformOnlyLabel)}}
	}
	return nil
}
