package platform

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
}

// maxOvercommit bounds the ratio: beyond it a quota means nothing.
const maxOvercommit = 100

// Validate checks the ratio.
func (s ServiceRangeArgs) Validate(path *field.Path) field.ErrorList {
	if s.Overcommit != 0 && (s.Overcommit < 1 || s.Overcommit > maxOvercommit) {
		return field.ErrorList{field.Invalid(path.Child("overcommit"), s.Overcommit,
			fmt.Sprintf("must be at least 1 (the quotas fit the range) and at most %d", maxOvercommit))}
	}
	return nil
}

func (s ServiceRangeArgs) ratio() float64 {
	if s.Overcommit == 0 {
		return 1
	}
	return s.Overcommit
}

// serviceRangeReserve is the share of the range no quota may promise: the platform's own Services (vCluster
// Platform, kube-state-metrics, the DRA driver's) before they exist, and the cluster's Services created after the
// check.
const serviceRangeReserve = 0.1

// defaultServiceCIDR is the ServiceCIDR the API server makes from its own range.
const defaultServiceCIDR = "kubernetes"

var (
	serviceCIDRsResource = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "servicecidrs"}
	ipAddressesResource  = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ipaddresses"}
)

// serviceRoom is a cluster's Service address range, as its ServiceCIDR and IPAddress objects say (networking.k8s.io/v1,
// Kubernetes 1.33 and later: https://kubernetes.io/docs/concepts/services-networking/cluster-ip-allocation/).
type serviceRoom struct {
	// cidrs are the ranges of the family Services take an address from by default.
	cidrs []string
	// size is how many addresses they hold for Services.
	size int64
	// usedElsewhere counts the allocated addresses of that family outside the tenants' namespaces.
	usedElsewhere int64
}

// serviceRoom reads the Service range of the cluster: nil when the cluster serves no ServiceCIDR objects or holds
// none.
func (l *liveCluster) serviceRoom(ctx context.Context, tenantNamespaces map[string]bool) (*serviceRoom, error) {
	cidrs, err := l.dyn.Resource(serviceCIDRsResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || err == nil && len(cidrs.Items) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's Service ranges (ServiceCIDRs): %w", err)
	}
	// Services of the default IP family policy (SingleStack) take an address of the family of the default
	// ServiceCIDR's first range, the one the API server makes from its --service-cluster-ip-range, named "kubernetes".
	var prefixes []netip.Prefix
	primary := true
	for i, item := range cidrs.Items {
		raw, _, _ := unstructured.NestedStringSlice(item.Object, "spec", "cidrs")
		for j, c := range raw {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				return nil, fmt.Errorf("ServiceCIDR %s: range %q: %w", item.GetName(), c, err)
			}
			prefixes = append(prefixes, p)
			if j == 0 && (item.GetName() == defaultServiceCIDR || i == 0) {
				primary = p.Addr().Is4()
			}
		}
	}
	room := &serviceRoom{}
	for _, p := range prefixes {
		if p.Addr().Is4() != primary {
			continue
		}
		room.cidrs = append(room.cidrs, p.String())
		room.size = addSaturating(room.size, serviceAddresses(p))
	}
	ips, err := l.dyn.Resource(ipAddressesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's allocated Service addresses (IPAddresses): %w", err)
	}
	for _, item := range ips.Items {
		addr, err := netip.ParseAddr(item.GetName())
		if err != nil || addr.Is4() != primary {
			continue
		}
		namespace, _, _ := unstructured.NestedString(item.Object, "spec", "parentRef", "namespace")
		if !tenantNamespaces[namespace] {
			room.usedElsewhere++
		}
	}
	return room, nil
}

// serviceAddresses is how many Service addresses a range gives: an IPv4 range less its network and broadcast
// addresses, an IPv6 range less its first (k8s.io/kubernetes v1.36.3 pkg/registry/core/service/ipallocator/ipallocator.go
// calculateRangeSize), at most a quarter of what an int64 counts.
func serviceAddresses(p netip.Prefix) int64 {
	bits := p.Addr().BitLen() - p.Bits()
	if bits >= 62 {
		return math.MaxInt64 / 4
	}
	n := int64(1) << bits
	if p.Addr().Is4() {
		return max(n-2, 0)
	}
	return max(n-1, 0)
}

func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// checkServiceRoom refuses tenants whose Service quotas, with the Services the cluster holds outside their
// namespaces, do not fit the cluster's Service range less a reserve, times serviceRange.overcommit; it says the ratio
// when the operator set one, and that the range could not be checked when the cluster does not say it.
func (l *liveCluster) checkServiceRoom(ctx context.Context, c *PlatformArgs, warn func(string)) error {
	namespaces := map[string]bool{}
	var quotas int64
	for _, t := range c.Tenants {
		namespaces[naming.Namespace(t.Name)] = true
		quotas += int64(t.ObjectQuota["services"])
	}
	room, err := l.serviceRoom(ctx, namespaces)
	if err != nil {
		return err
	}
	ratioKey := c.Keys.Path(keyServiceRange).Child("overcommit")
	if room == nil {
		warn(fmt.Sprintf("the cluster's Service range could not be checked against the tenants' Service quotas: it serves "+
			"no ServiceCIDR (networking.k8s.io/v1, Kubernetes 1.33 or later); check that %s together fit it", c.Keys.Path(keyTenants).Key("*").Child("objectQuota").Key("services")))
		return nil
	}
	ratio := c.ServiceRange.ratio()
	promisable := int64(float64(room.size) * (1 - serviceRangeReserve))
	budget := int64(float64(promisable-room.usedElsewhere) * ratio)
	demand := fmt.Sprintf("the tenants' Service quotas (%s) add up to %d for %s, and the cluster holds %s outside "+
		"their namespaces", c.Keys.Path(keyTenants).Key("*").Child("objectQuota").Key("services"), quotas,
		counted(int64(len(c.Tenants)), "tenant"), counted(room.usedElsewhere, "Service address"))
	rangeSays := fmt.Sprintf("the Service range %s holds %d addresses, of which %d may be promised (%.0f%% kept free)",
		strings.Join(room.cidrs, ", "), room.size, promisable, serviceRangeReserve*100)
	if quotas > budget {
		return fmt.Errorf("%s: %s, but %s, times %s %g: %d. A tenant that filled its quota would make other tenants' "+
			"Services and vClusters fail. Lower the quotas, widen the range (a further ServiceCIDR), or set %s above %g "+
			"to say that not every tenant fills its quota", c.Keys.Path(keyTenants), demand, rangeSays, ratioKey, ratio,
			budget, ratioKey, ratio)
	}
	if ratio != 1 {
		warn(fmt.Sprintf("%s is %g: %s, and %s; the quotas may add up to %g times the room left, so a tenant that fills "+
			"its quota can make another tenant's Service or vCluster fail", ratioKey, ratio, demand, rangeSays, ratio))
	}
	return nil
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
