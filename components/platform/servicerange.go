package platform

import (
	"context"
	"fmt"
	"strings"

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
	var quotas int64
	for _, t := range c.Tenants {
		namespaces[naming.Namespace(t.Name)] = true
		quotas += int64(t.ObjectQuota["services"])
	}
	room, err := l.serviceRoom(ctx)
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
	elsewhere := room.UsedOutside(namespaces)
	promisable := int64(float64(room.Size) * (1 - serviceRangeReserve))
	budget := int64(float64(promisable-elsewhere) * ratio)
	demand := fmt.Sprintf("the tenants' Service quotas (%s) add up to %d for %s, and the cluster holds %s outside "+
		"their namespaces", c.Keys.Path(keyTenants).Key("*").Child("objectQuota").Key("services"), quotas,
		counted(int64(len(c.Tenants)), "tenant"), counted(elsewhere, "Service address"))
	rangeSays := fmt.Sprintf("the Service range %s holds %d addresses, of which %d may be promised (%.0f%% kept free)",
		strings.Join(room.CIDRs, ", "), room.Size, promisable, serviceRangeReserve*100)
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
