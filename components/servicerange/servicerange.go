// Package servicerange reads a cluster's Service address range from its ServiceCIDR and IPAddress objects
// (networking.k8s.io/v1, Kubernetes 1.33 and later: https://kubernetes.io/docs/concepts/services-networking/cluster-ip-allocation/):
// how many addresses the range gives Services, and who holds them. The platform weighs the tenants' Service quotas
// against it, and the operators' CLI shows its use.
package servicerange

import (
	"math"
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
)

// Default is the ServiceCIDR the API server makes from its own --service-cluster-ip-range.
const Default = "kubernetes"

// Room is the range Services of the default IP family policy (SingleStack) take their addresses from: the family of
// the default ServiceCIDR's first range.
type Room struct {
	// CIDRs are the ranges of that family, of every ServiceCIDR.
	CIDRs []string
	// Size is how many addresses they give Services.
	Size int64
	// Used counts the addresses of that family held, by the namespace of the object that holds each ("" for one
	// without a namespace).
	Used map[string]int64
}

// Of is the room the ServiceCIDRs and IPAddresses describe; nil when there is no ServiceCIDR. A range that does not
// parse is left out.
func Of(cidrs []networkingv1.ServiceCIDR, ips []networkingv1.IPAddress) *Room {
	if len(cidrs) == 0 {
		return nil
	}
	var prefixes []netip.Prefix
	v4 := true
	for i, c := range cidrs {
		for j, raw := range c.Spec.CIDRs {
			p, err := netip.ParsePrefix(raw)
			if err != nil {
				continue
			}
			prefixes = append(prefixes, p)
			if j == 0 && (c.Name == Default || i == 0) {
				v4 = p.Addr().Is4()
			}
		}
	}
	room := &Room{Used: map[string]int64{}}
	for _, p := range prefixes {
		if p.Addr().Is4() == v4 {
			room.CIDRs = append(room.CIDRs, p.String())
			room.Size = addSaturating(room.Size, Addresses(p))
		}
	}
	for _, ip := range ips {
		addr, err := netip.ParseAddr(ip.Name)
		if err != nil || addr.Is4() != v4 {
			continue
		}
		namespace := ""
		if ip.Spec.ParentRef != nil {
			namespace = ip.Spec.ParentRef.Namespace
		}
		room.Used[namespace]++
	}
	return room
}

// UsedOutside counts the addresses held outside the namespaces given.
func (r *Room) UsedOutside(namespaces map[string]bool) int64 {
	var n int64
	for ns, used := range r.Used {
		if !namespaces[ns] {
			n += used
		}
	}
	return n
}

// UsedTotal counts every address held.
func (r *Room) UsedTotal() int64 { return r.UsedOutside(nil) }

// Addresses is how many Service addresses a range gives: an IPv4 range less its network and broadcast addresses, an
// IPv6 range less its first (k8s.io/kubernetes v1.36.3 pkg/registry/core/service/ipallocator/ipallocator.go
// calculateRangeSize), at most a quarter of what an int64 counts.
func Addresses(p netip.Prefix) int64 {
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

// Reserve is the share of a range no quota may promise: the platform's own Services (vCluster Platform,
// kube-state-metrics, the DRA driver's) before they exist, and the cluster's Services created after a check.
const Reserve = 0.1

// Promisable is how many of size addresses the tenants' Service quotas may promise: all but the Reserve.
func Promisable(size int64) int64 { return int64(float64(size) * (1 - Reserve)) }

// Growth is how many times the tenants' Service quotas a range sized for them can promise: room for as many
// tenants again before the cluster, whose range cannot change, must be replaced.
const Growth = 2

// Sized is the range a new cluster is made with for tenants whose Service quotas add up to need: def, the cloud's own
// default, while it can promise need, so that a cluster made before keeps its range as long as its tenants fit it;
// else the narrowest range at widest's address that can promise Growth times need, no wider than widest; false when
// not even widest can.
func Sized(need int64, def, widest netip.Prefix) (netip.Prefix, bool) {
	if Promisable(Addresses(def)) >= need {
		return def, true
	}
	want := addSaturating(need, need*(Growth-1))
	for bits := def.Bits(); bits >= widest.Bits(); bits-- {
		if p := netip.PrefixFrom(widest.Addr(), bits).Masked(); Promisable(Addresses(p)) >= want {
			return p, true
		}
	}
	return widest, false
}

func addSaturating(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
