package platform

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/servicerange"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ServiceRangeArgs are the serviceRange key: how the tenants' Service quotas are weighed against the cluster's
// Service address range. Every Service of a tenant's namespace, its vCluster's own and those vCluster copies to the
// host for the tenant, takes a cluster IP from the one range all tenants share (docs/tenants.md, "Limits and
// quotas"), so tenants' quotas that add up to more than the range let one tenant's Services make another's fail.
type ServiceRangeArgs struct {
	// Overcommit is how many times the range's room the tenants' Service quotas may add up to: 1, the default, refuses
	// quotas that could fill it together; more says, deliberately, that not every tenant fills its quota.
	Overcommit float64 `json:"overcommit"`
	// CIDR is the Service range a cloud cluster is made with; unset, the cloud's own while it holds the tenants'
	// quotas, else one sized for twice them (servicerange.Sized). The cloud cannot change it afterwards: a new range
	// replaces the cluster.
	CIDR string `json:"cidr"`
	// ReplaceCluster confirms a plan that replaces the cloud cluster while it holds tenants, as a new range does:
	// without it, the cluster is protected and such a preview is refused.
	ReplaceCluster bool `json:"replaceCluster"`
}

// maxOvercommit bounds the ratio: beyond it a quota means nothing.
const maxOvercommit = 100

// Validate checks the ratio and the range, which only a cloud cluster the program makes takes (onCloud).
func (s ServiceRangeArgs) Validate(path *field.Path, onCloud bool) field.ErrorList {
	var errs field.ErrorList
	if s.Overcommit != 0 && (s.Overcommit < 1 || s.Overcommit > maxOvercommit) {
		errs = append(errs, field.Invalid(path.Child("overcommit"), s.Overcommit,
			fmt.Sprintf("must be at least 1 (the quotas fit the range) and at most %d", maxOvercommit)))
	}
	for key, set := range map[string]bool{"cidr": s.CIDR != "", "replaceCluster": s.ReplaceCluster} {
		if set && !onCloud {
			errs = append(errs, field.Forbidden(path.Child(key), "is for a cluster the program makes: an existing cluster's "+
				"range is read from its ServiceCIDRs, and a further ServiceCIDR widens it"))
		}
	}
	if s.CIDR != "" && onCloud {
		if e := fieldcheck.CIDR(path.Child("cidr"), s.CIDR); len(e) > 0 {
			errs = append(errs, e...)
		} else if !netip.MustParsePrefix(s.CIDR).Addr().Is4() {
			errs = append(errs, field.Invalid(path.Child("cidr"), s.CIDR, "must be an IPv4 range: the clouds take one for Services"))
		}
	}
	return errs
}

// clusterServiceRange is the Service range of the cloud cluster, for ranges, the cloud's: the stack's own, or the
// one sized for the tenants' quotas, "" where the cloud's own default holds them; fits is false when no range up to
// the widest holds twice them. The cluster is protected while it holds tenants, unless the operator confirmed its replacement.
func (c *PlatformArgs) clusterServiceRange(ranges cluster.ServiceRanges) (r cluster.ServiceRange, fits bool) {
	r.Protect = len(c.Tenants) > 0 && !c.ServiceRange.ReplaceCluster
	if c.ServiceRange.CIDR != "" {
		r.CIDR = c.ServiceRange.CIDR
		return r, true
	}
	sized, fits := servicerange.Sized(c.serviceQuotas(), ranges.Default, ranges.Widest)
	if sized != ranges.Default {
		r.CIDR = sized.String()
	}
	return r, fits
}

// serviceAddresses is how many addresses the cluster's Service range gives Services: the range a cloud cluster is
// made with (or was: the cloud keeps it), or what an existing cluster's ServiceCIDRs said to this run's check; zero
// when neither is known.
func (c *PlatformArgs) serviceAddresses() int64 {
	cloud, ok := cloudClusters[c.Cloud]
	if !ok {
		return c.liveServiceAddresses
	}
	return servicerange.Addresses(c.cloudServiceRange(cloud.ranges))
}

// cloudServiceRange is the range the cloud cluster is made with: its own, or the cloud's default.
func (c *PlatformArgs) cloudServiceRange(ranges cluster.ServiceRanges) netip.Prefix {
	if r, _ := c.clusterServiceRange(ranges); r.CIDR != "" {
		return netip.MustParsePrefix(r.CIDR)
	}
	return ranges.Default
}

// serviceQuotas is what the tenants' Service quotas add up to.
func (c *PlatformArgs) serviceQuotas() int64 {
	var quotas int64
	for _, t := range c.Tenants {
		quotas += int64(t.ObjectQuota["services"])
	}
	return quotas
}

// sizedRangeSaid is what a preview says when the tenants' quotas outgrow the cloud's own range and the program sizes
// one for them: a cluster made before with the cloud's range would be replaced; "" otherwise.
func (c *PlatformArgs) sizedRangeSaid(ranges cluster.ServiceRanges) string {
	r, _ := c.clusterServiceRange(ranges)
	if c.ServiceRange.CIDR != "" || r.CIDR == "" {
		return ""
	}
	return fmt.Sprintf("the tenants' Service quotas (%s) add up to %d, more than the cloud's own Service range %s can "+
		"promise (%d): a new cluster is made with %s, twice their room; a cluster made before with the cloud's range "+
		"would be replaced, which is refused while it holds tenants unless %s is set: lower the quotas to keep it",
		c.quotaKey(), c.serviceQuotas(), ranges.Default, servicerange.Promisable(servicerange.Addresses(ranges.Default)),
		r.CIDR, c.Keys.Path(keyServiceRange).Child("replaceCluster"))
}

// validateCloudServiceRoom weighs the tenants' Service quotas against the range the cloud cluster is made with (or
// has: the program cannot read it before the cluster answers, and the cloud keeps the range it was made with), as
// checkServiceRoom does an existing cluster's, with nothing held outside their namespaces yet.
func validateCloudServiceRoom(c *PlatformArgs, ranges cluster.ServiceRanges) field.ErrorList {
	_, fits := c.clusterServiceRange(ranges)
	cidr := c.cloudServiceRange(ranges)
	cidrKey := c.Keys.Path(keyServiceRange).Child("cidr")
	widen := fmt.Sprintf("set %s to a wider range (which replaces a cluster that holds tenants: set %s too)", cidrKey,
		c.Keys.Path(keyServiceRange).Child("replaceCluster"))
	if c.ServiceRange.CIDR == "" && !fits {
		widen = fmt.Sprintf("no range up to %s, the widest the program gives a cluster, holds them; set %s to a wider "+
			"range of your own", ranges.Widest, cidrKey)
	}
	if problem := c.weighServiceRoom(cidr.String(), servicerange.Addresses(cidr), 0, widen); problem != "" {
		return field.ErrorList{field.Invalid(c.Keys.Path(keyTenants), counted(int64(len(c.Tenants)), "tenant"), problem)}
	}
	return nil
}

func (s ServiceRangeArgs) ratio() float64 {
	if s.Overcommit == 0 {
		return 1
	}
	return s.Overcommit
}

var (
	serviceCIDRsResource = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"}
	ipAddressesResource  = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ipaddresses"}
)

// serviceRoom reads the cluster's Service range: nil when the cluster serves no ServiceCIDR objects or holds none.
func (l *liveCluster) serviceRoom(ctx context.Context) (*servicerange.Room, error) {
	list, err := l.dyn.Resource(serviceCIDRsResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's Service ranges (ServiceCIDRs): %w", err)
	}
	var cidrs []networkingv1.ServiceCIDR
	if err := fromUnstructured(list, &cidrs); err != nil {
		return nil, err
	}
	if list, err = l.dyn.Resource(ipAddressesResource).List(ctx, metav1.ListOptions{}); err != nil {
		return nil, fmt.Errorf("reading the cluster's allocated Service addresses (IPAddresses): %w", err)
	}
	var ips []networkingv1.IPAddress
	if err := fromUnstructured(list, &ips); err != nil {
		return nil, err
	}
	return servicerange.Of(cidrs, ips), nil
}

// fromUnstructured converts a list's items into their typed objects.
func fromUnstructured[T any](list *unstructured.UnstructuredList, out *[]T) error {
	for _, item := range list.Items {
		var obj T
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.Object, &obj); err != nil {
			return fmt.Errorf("reading %s %s: %w", item.GetKind(), item.GetName(), err)
		}
		*out = append(*out, obj)
	}
	return nil
}

// checkServiceRoom refuses tenants whose Service quotas, with the Services the cluster holds outside their
// namespaces, do not fit the cluster's Service range less a reserve, times serviceRange.overcommit; it says the ratio
// when the operator set one, and that the range could not be checked when the cluster does not say it.
func (l *liveCluster) checkServiceRoom(ctx context.Context, c *PlatformArgs, warn func(string)) error {
	namespaces := map[string]bool{}
	for _, t := range c.Tenants {
		namespaces[naming.Namespace(t.Name)] = true
	}
	room, err := l.serviceRoom(ctx)
	if err != nil {
		return err
	}
	if room == nil {
		warn(fmt.Sprintf("the cluster's Service range could not be checked against the tenants' Service quotas: it serves "+
			"no ServiceCIDR (networking.k8s.io/v1, Kubernetes 1.33 or later); check that %s together fit it", c.quotaKey()))
		return nil
	}
	c.liveServiceAddresses = room.Size
	problem := c.weighServiceRoom(strings.Join(room.CIDRs, ", "), room.Size, room.UsedOutside(namespaces), "widen the range (a further ServiceCIDR)")
	if problem != "" {
		return fmt.Errorf("%s: %s", c.Keys.Path(keyTenants), problem)
	}
	if said := c.overcommitSaid(strings.Join(room.CIDRs, ", "), room.Size); said != "" {
		warn(said)
	}
	return nil
}

func (c *PlatformArgs) quotaKey() *field.Path {
	return c.Keys.Path(keyTenants).Key("*").Child("objectQuota").Key("services")
}

// weighServiceRoom says why the tenants' Service quotas do not fit a range of size addresses (cidrs) of which
// elsewhere are held outside their namespaces, less the reserve, times serviceRange.overcommit; "" when they do.
// widen says how the range grows.
func (c *PlatformArgs) weighServiceRoom(cidrs string, size, elsewhere int64, widen string) string {
	ratioKey, ratio := c.Keys.Path(keyServiceRange).Child("overcommit"), c.ServiceRange.ratio()
	quotas := c.serviceQuotas()
	promisable := servicerange.Promisable(size)
	budget := int64(float64(promisable-elsewhere) * ratio)
	if quotas <= budget {
		return ""
	}
	return fmt.Sprintf("the tenants' Service quotas (%s) add up to %d for %s, and the cluster holds %s outside their "+
		"namespaces, but the Service range %s holds %d addresses, of which %d may be promised (%.0f%% kept free), times "+
		"%s %g: %d. A tenant that filled its quota would make other tenants' Services and vClusters fail. Lower the "+
		"quotas, %s, or set %s above %g to say that not every tenant fills its quota", c.quotaKey(), quotas,
		counted(int64(len(c.Tenants)), "tenant"), counted(elsewhere, "Service address"), cidrs, size, promisable,
		servicerange.Reserve*100, ratioKey, ratio, budget, widen, ratioKey, ratio)
}

// overcommitSaid is what a preview says of an overcommit the operator set, for a range of size addresses (cidrs);
// "" for none.
func (c *PlatformArgs) overcommitSaid(cidrs string, size int64) string {
	if ratio := c.ServiceRange.ratio(); ratio != 1 {
		return fmt.Sprintf("%s is %g: the tenants' Service quotas (%s) add up to %d for %s, and the Service range %s holds "+
			"%d addresses; the quotas may add up to %g times the room it leaves them, so a tenant that fills its quota can "+
			"make another tenant's Service or vCluster fail", c.Keys.Path(keyServiceRange).Child("overcommit"), ratio,
			c.quotaKey(), c.serviceQuotas(), counted(int64(len(c.Tenants)), "tenant"), cidrs, size, ratio)
	}
	return ""
}

// counted is n things, in the plural but for one.
func counted(n int64, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if strings.HasSuffix(thing, "s") {
		return fmt.Sprintf("%d %ses", n, thing)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
