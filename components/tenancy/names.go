// Package tenancy turns the platform's GPU catalog into host-cluster objects: one DeviceClass per GPU class, the
// admission policies that let a tenant's namespace claim only the classes granted to it, and per tenant a host
// namespace with quotas, default container resources and network policies. Names and labels come from package naming.
package tenancy

import (
	"fmt"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Name limits. A tenant's host namespace is a DNS label (63 characters), so the tenant name gets 63 minus the
// namespace prefix; the grant labels' name parts (tenant.gpu-tenancy.io/<tenant> on a DeviceClass,
// class.gpu-tenancy.io/<class> on a tenant namespace) allow 63 (k8s.io/apimachinery v0.34.4
// pkg/util/validation/validation.go IsQualifiedName), which also keeps the quota key
// "<class>.deviceclass.resource.k8s.io/devices" within a DNS subdomain.
const (
	MaxTenantName = 63 - len(naming.NamespacePrefix)
	MaxClassName  = 63
)

// ValidateTenantName checks a tenant name against what the names derived from it allow. vCluster joins the parts of a
// host object's name with -x- (vcluster-<class>-x-<namespace>-x-<tenant> for a PriorityClass: loft-sh/vcluster v0.36.1
// pkg/util/translate/single_namespace.go), so a tenant whose name holds -x- could write names that are another
// tenant's.
func ValidateTenantName(path *field.Path, name string) field.ErrorList {
	errs := fieldcheck.DNSLabel(path, name, MaxTenantName)
	if strings.Contains(name, vclusterNameJoin) {
		errs = append(errs, field.Invalid(path, name, "may not contain "+vclusterNameJoin+", with which vCluster joins the parts of "+
			"the names it writes on the host, so that a tenant's names cannot pass for another's"))
	}
	return errs
}

// vclusterNameJoin is what vCluster puts between the parts of a host object's name.
const vclusterNameJoin = "-x-"

// ValidateClassName checks a GPU class name. Names under nvidia.com are the NVIDIA DRA driver's own classes, which
// select every GPU: the catalog must never shadow or re-grant them.
func ValidateClassName(path *field.Path, name string) field.ErrorList {
	errs := fieldcheck.DNSSubdomain(path, name, MaxClassName)
	if len(errs) == 0 && (name == strings.TrimPrefix(naming.DriverClassSuffix, ".") || strings.HasSuffix(name, naming.DriverClassSuffix)) {
		errs = append(errs, field.Invalid(path, name, fmt.Sprintf(
			"names ending in %s are the classes the NVIDIA DRA driver creates itself (gpu.nvidia.com, mig.nvidia.com, ...); choose a name of your own",
			naming.DriverClassSuffix)))
	}
	return errs
}
