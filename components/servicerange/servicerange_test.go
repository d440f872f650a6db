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

// A range keeps the cloud's own while it holds the tenants' quotas, less the reserve, so that a cluster made before
// keeps its range as long as its tenants fit; past it, the narrowest range at the widest range's address that holds
// twice the quotas, never wider than it.
func TestARangeIsSizedForTheQuotas(t *testing.T) {
	def, widest := netip.MustParsePrefix("10.32.0.0/20"), netip.MustParsePrefix("10.32.0.0/16")
	for _, tc := range []struct {
		name string
		need int64
		want string
		fits bool
	}{
		{"no tenants keep the cloud's range", 0, "10.32.0.0/20", true},
		{"quotas just within the cloud's range keep it", 3684, "10.32.0.0/20", true}, // 4094 × 0.9
		{"one more gets twice its room", 3685, "10.32.0.0/19", true},                 // 8190 × 0.9 = 7371 ≥ 2 × 3685
		{"a thousand tenants at the default 20", 20000, "10.32.0.0/16", true},        // 2 × 20000 > 32766 × 0.9
		{"the widest range at its edge", 29490, "10.32.0.0/16", true},                // 65534 × 0.9 = 58980
		{"past the widest range", 29491, "10.32.0.0/16", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, fits := Sized(tc.need, def, widest)
			assert.Equal(t, tc.want, got.String())
			assert.Equal(t, tc.fits, fits)
		})
	}
	got, fits := Sized(5000, netip.MustParsePrefix("34.118.224.0/20"), netip.MustParsePrefix("10.96.0.0/16"))
	assert.True(t, fits)
	assert.Equal(t, "10.96.0.0/18", got.String(), "a range of its own at the widest's address, where the cloud's default lies elsewhere")
}
