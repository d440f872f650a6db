package servicerange

import (
	"math"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAddressesAreWhatTheAllocatorGivesServices(t *testing.T) {
	for cidr, want := range map[string]int64{
		"10.0.0.0/24": 254, "10.0.0.0/16": 65534, "10.0.0.0/31": 0, "10.0.0.0/30": 2,
		"fd00::/108": 1<<20 - 1, "fd00::/120": 255, "fd00::/64": math.MaxInt64 / 4,
	} {
		assert.Equal(t, want, Addresses(netip.MustParsePrefix(cidr)), cidr)
	}
}

func serviceCIDR(name string, cidrs ...string) networkingv1.ServiceCIDR {
	return networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
}

func ipAddress(ip, namespace string) networkingv1.IPAddress {
	return networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: ip},
		Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: namespace, Name: "s"}}}
}

func TestTheRoomIsTheDefaultRangesFamily(t *testing.T) {
	ips := []networkingv1.IPAddress{ipAddress("10.0.0.1", "default"), ipAddress("10.0.0.2", "vcluster-a"),
		ipAddress("10.0.0.3", "vcluster-a"), ipAddress("fd00::5", "vcluster-b")}
	for _, tc := range []struct {
		name  string
		cidrs []networkingv1.ServiceCIDR
		want  *Room
	}{
		{"no ServiceCIDR: not known", nil, nil},
		{"one IPv4 range", []networkingv1.ServiceCIDR{serviceCIDR(Default, "10.0.0.0/24")},
			&Room{CIDRs: []string{"10.0.0.0/24"}, Size: 254, Used: map[string]int64{"default": 1, "vcluster-a": 2}}},
		{"a further ServiceCIDR widens it", []networkingv1.ServiceCIDR{serviceCIDR("more", "10.1.0.0/24"), serviceCIDR(Default, "10.0.0.0/24")},
			&Room{CIDRs: []string{"10.1.0.0/24", "10.0.0.0/24"}, Size: 508, Used: map[string]int64{"default": 1, "vcluster-a": 2}}},
		{"dual stack, IPv6 first: single-stack Services take IPv6", []networkingv1.ServiceCIDR{serviceCIDR(Default, "fd00::/120", "10.0.0.0/24")},
			&Room{CIDRs: []string{"fd00::/120"}, Size: 255, Used: map[string]int64{"vcluster-b": 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Of(tc.cidrs, ips)
			if tc.want == nil {
				require.Nil(t, got)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
	room := Of([]networkingv1.ServiceCIDR{serviceCIDR(Default, "10.0.0.0/24")}, ips)
	assert.Equal(t, int64(1), room.UsedOutside(map[string]bool{"vcluster-a": true}))
	assert.Equal(t, int64(3), room.UsedTotal())
}
