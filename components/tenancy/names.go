// Package tenancy turns the platform's GPU catalog into host-cluster objects: one DeviceClass per GPU class, an
// admission policy that lets a tenant's namespace claim only the classes granted to it, and per tenant a host
// namespace with grants, quotas, default container resources and network policies.
package tenancy

import (
	"fmt"
	"regexp"
	"strings"
)

// Labels and names shared with the vCluster component and the end-to-end tests.
const (
	// TenantNamespaceLabel marks a tenant's host namespace; the admission bindings select namespaces by it.
	TenantNamespaceLabel = "gpu-tenancy.io/tenant"
	// ClassTenantLabelPrefix prefixes the per-tenant grant label on DeviceClasses (see ClassTenantLabel).
	ClassTenantLabelPrefix = "tenant.gpu-tenancy.io/"
	// ManagedByLabel and ManagedBy mark every object this package creates.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "gpu-tenancy"
	// SystemNamespace holds the platform-owned grants; tenants and vCluster syncers have no access to it, so a tenant
	// cannot widen its own grant.
	SystemNamespace = "gpu-tenancy-system"
	// NamespacePrefix prefixes each tenant's host namespace (see Namespace).
	NamespacePrefix = "vcluster-"
)

// ClassTenantLabel is the label a DeviceClass carries, with value "true", for each tenant granted the class; a
// tenant's vCluster syncs DeviceClasses with selector matchLabels{ClassTenantLabel(tenant): "true"}.
func ClassTenantLabel(tenant string) string {
	return ClassTenantLabelPrefix + tenant
}

// Namespace is the host namespace of a tenant's vCluster and of everything it syncs to the host.
func Namespace(tenant string) string {
	return NamespacePrefix + tenant
}

// GrantsConfigMap is the name of a tenant's grants ConfigMap in SystemNamespace, the entitlement policy's params.
func GrantsConfigMap(tenant string) string {
	return "grants-" + tenant
}

// EntitlementBinding is the name of the ValidatingAdmissionPolicyBinding that applies a tenant's grants.
func EntitlementBinding(tenant string) string {
	return EntitlementPolicyName + "-" + tenant
}

var (
	dnsLabel     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// Name limits: a namespace name is a DNS label (63), so the tenant name gets 63 minus the prefix; a class name ends up
// in the quota key "<class>.deviceclass.resource.k8s.io/devices", whose prefix part is a DNS subdomain (253).
const (
	maxTenantName = 63 - len(NamespacePrefix)
	maxClassName  = 253 - len(".deviceclass.resource.k8s.io")
)

// ValidateTenantName reports why name cannot name a tenant, or nil.
func ValidateTenantName(name string) error {
	if name == "" {
		return fmt.Errorf("tenant name is empty")
	}
	if len(name) > maxTenantName || !dnsLabel.MatchString(name) {
		return fmt.Errorf("tenant name %q must be a DNS label (lower-case letters, digits, '-') of at most %d characters", name, maxTenantName)
	}
	return nil
}

// ValidateClassName reports why name cannot name a GPU class, or nil. Names under nvidia.com are the driver's own
// classes, which select every GPU; the catalog must never shadow or re-grant them.
func ValidateClassName(name string) error {
	if name == "" {
		return fmt.Errorf("class name is empty")
	}
	if len(name) > maxClassName || !dnsSubdomain.MatchString(name) {
		return fmt.Errorf("class name %q must be a DNS subdomain (lower-case letters, digits, '-', '.') of at most %d characters", name, maxClassName)
	}
	if name == "nvidia.com" || strings.HasSuffix(name, ".nvidia.com") {
		return fmt.Errorf("class name %q is reserved for the NVIDIA DRA driver's own DeviceClasses", name)
	}
	return nil
}
