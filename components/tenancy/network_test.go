package tenancy

import (
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func networkPoliciesOf(t *testing.T, network NetworkArgs, blocked ...string) (map[string]*networkingv1.NetworkPolicy, *mocktest.Recorder) {
	t.Helper()
	args := teamA()
	args.Network, args.BlockedEgressCIDRs = network, blocked
	rec := runPlatform(t, testClasses, args)
	out := map[string]*networkingv1.NetworkPolicy{}
	for _, reg := range rec.ByType(netpolType) {
		childOf(t, reg, tenantType)
		np := decode[networkingv1.NetworkPolicy](t, reg)
		assert.Equal(t, naming.Namespace("team-a"), np.Namespace)
		assert.Empty(t, np.Spec.PodSelector.MatchLabels, "%s must select every pod", np.Name)
		out[np.Name] = np
	}
	return out, rec
}

func port(protocol corev1.Protocol, n int) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(int32(n))
	return networkingv1.NetworkPolicyPort{Protocol: &protocol, Port: &p}
}

func TestNetworkPoliciesDefault(t *testing.T) {
	nps, rec := networkPoliciesOf(t, NetworkArgs{})
	require.ElementsMatch(t, []string{"deny-all", "allow-same-namespace", "allow-dns", "allow-egress-internet"}, keys(nps))
	assert.Empty(t, rec.ByType(ciliumType))

	t.Run("deny-all isolates both directions", func(t *testing.T) {
		np := nps["deny-all"]
		assert.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
		assert.Empty(t, np.Spec.Ingress)
		assert.Empty(t, np.Spec.Egress)
	})
	t.Run("same namespace only, so no other tenant", func(t *testing.T) {
		np := nps["allow-same-namespace"]
		require.Len(t, np.Spec.Ingress, 1)
		require.Len(t, np.Spec.Ingress[0].From, 1)
		from := np.Spec.Ingress[0].From[0]
		assert.Nil(t, from.NamespaceSelector, "a namespace selector would admit other namespaces")
		require.NotNil(t, from.PodSelector)
		assert.Empty(t, from.PodSelector.MatchLabels)
		require.Len(t, np.Spec.Egress, 1)
		assert.Equal(t, np.Spec.Ingress[0].From, np.Spec.Egress[0].To)
	})
	t.Run("DNS by selector on port 53", func(t *testing.T) {
		np := nps["allow-dns"]
		require.Len(t, np.Spec.Egress, 1)
		rule := np.Spec.Egress[0]
		require.Len(t, rule.To, 1)
		assert.Nil(t, rule.To[0].IPBlock, "Cilium does not match pod IPs with ipBlock")
		require.NotNil(t, rule.To[0].NamespaceSelector)
		assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "kube-system"}, rule.To[0].NamespaceSelector.MatchLabels)
		require.NotNil(t, rule.To[0].PodSelector)
		assert.Equal(t, map[string]string{"k8s-app": "kube-dns"}, rule.To[0].PodSelector.MatchLabels)
		assert.ElementsMatch(t, []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, 53), port(corev1.ProtocolTCP, 53)}, rule.Ports)
	})
	t.Run("internet egress blocks every cloud's metadata endpoints, IPv4 and IPv6", func(t *testing.T) {
		blocks := ipBlocks(t, nps["allow-egress-internet"])
		assert.Equal(t, map[string][]string{
			"0.0.0.0/0": {"169.254.169.254/32", "169.254.169.252/32", "169.254.42.42/32", "100.100.100.200/32", "169.254.0.23/32", "169.254.170.23/32"},
			"::/0":      {"fd00:ec2::254/128", "fd00:ec2::23/128", "fd20:ce::254/128", "fd00:42::42/128", "fe80::a9fe:a9fe/128"},
		}, blocks)
		for _, except := range blocks {
			assert.NotContains(t, except, "169.254.0.0/16", "node-local DNS caches live in the link-local range")
		}
		assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, nps["allow-egress-internet"].Spec.PolicyTypes)
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// ipBlocks maps each ipBlock CIDR of a single-rule egress policy to its exceptions.
func ipBlocks(t *testing.T, np *networkingv1.NetworkPolicy) map[string][]string {
	t.Helper()
	require.Len(t, np.Spec.Egress, 1)
	out := map[string][]string{}
	for _, peer := range np.Spec.Egress[0].To {
		require.NotNil(t, peer.IPBlock)
		except := peer.IPBlock.Except
		if len(except) == 0 {
			except = nil
		}
		out[peer.IPBlock.CIDR] = except
	}
	return out
}

func TestNetworkPoliciesBlockedEgressSplitByFamily(t *testing.T) {
	nps, _ := networkPoliciesOf(t, NetworkArgs{}, "10.0.0.0/8", "fd20:ce::254/128", "fd12::/16")
	blocks := ipBlocks(t, nps["allow-egress-internet"])
	assert.Equal(t, append(v4Metadata(), "10.0.0.0/8"), blocks["0.0.0.0/0"])
	assert.Equal(t, append(v6Metadata(), "fd12::/16"), blocks["::/0"], "a metadata address given again is listed once")
}

// The cluster's pod ranges leave every tenant's internet egress, besides the metadata endpoints and before the
// tenant's own blocked ranges, each listed once.
func TestNetworkPoliciesPodRangesLeaveInternetEgress(t *testing.T) {
	nps, _ := networkPoliciesOf(t, NetworkArgs{PodCIDRs: []string{"10.244.0.0/16", "fd00:10:244::/56"}}, "10.244.0.0/16", "192.168.0.0/16")
	blocks := ipBlocks(t, nps["allow-egress-internet"])
	assert.Equal(t, append(v4Metadata(), "10.244.0.0/16", "192.168.0.0/16"), blocks["0.0.0.0/0"])
	assert.Equal(t, append(v6Metadata(), "fd00:10:244::/56"), blocks["::/0"])
}

func TestNetworkArgsRefusesAPodRangeOfEverything(t *testing.T) {
	errs := NetworkArgs{PodCIDRs: []string{"10.244.0.0/16", "0.0.0.0/0", "10.1.0.1/16"}}.Validate(field.NewPath("network"))
	require.Len(t, errs, 2)
	assert.Equal(t, "network.podCIDRs[1]", errs[0].Field)
	assert.Contains(t, errs[0].Error(), "would block all egress")
	assert.Equal(t, "network.podCIDRs[2]", errs[1].Field)
	assert.Contains(t, errs[1].Error(), "host bits")
}

func v4Metadata() []string {
	var out []string
	for _, c := range MetadataCIDRs {
		if !strings.Contains(c, ":") {
			out = append(out, c)
		}
	}
	return out
}

func v6Metadata() []string {
	var out []string
	for _, c := range MetadataCIDRs {
		if strings.Contains(c, ":") {
			out = append(out, c)
		}
	}
	return out
}

func TestNetworkPoliciesAPIServer(t *testing.T) {
	tests := []struct {
		name      string
		network   NetworkArgs
		wantPorts []networkingv1.NetworkPolicyPort
	}{
		{"default ports", NetworkArgs{APIServerCIDRs: []string{"172.16.0.2/32"}},
			[]networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 443), port(corev1.ProtocolTCP, 6443)}},
		{"configured port", NetworkArgs{APIServerCIDRs: []string{"172.16.0.2/32"}, APIServerPorts: []int{8443}},
			[]networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 8443)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nps, _ := networkPoliciesOf(t, tt.network)
			np, ok := nps["allow-egress-apiserver"]
			require.True(t, ok)
			assert.Equal(t, map[string][]string{"172.16.0.2/32": nil}, ipBlocks(t, np))
			assert.Equal(t, tt.wantPorts, np.Spec.Egress[0].Ports)
		})
	}
}

func TestNetworkPoliciesIngressFromPlatformNamespaces(t *testing.T) {
	nps, _ := networkPoliciesOf(t, NetworkArgs{IngressFromNamespaces: []string{"vcluster-platform"}})
	np, ok := nps["allow-ingress-platform"]
	require.True(t, ok)
	assert.Equal(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, np.Spec.PolicyTypes)
	require.Len(t, np.Spec.Ingress, 1)
	require.Len(t, np.Spec.Ingress[0].From, 1)
	from := np.Spec.Ingress[0].From[0]
	require.NotNil(t, from.NamespaceSelector)
	assert.Equal(t, map[string]string{"kubernetes.io/metadata.name": "vcluster-platform"}, from.NamespaceSelector.MatchLabels)
	assert.Nil(t, from.PodSelector)
}

func TestCiliumAPIServerPolicy(t *testing.T) {
	_, rec := networkPoliciesOf(t, NetworkArgs{CiliumAPIServerAccess: true, APIServerPorts: []int{6443}})
	reg := get(t, rec, ciliumType, "team-a-allow-egress-kube-apiserver")
	childOf(t, reg, tenantType)
	in := reg.Inputs.Mappable()
	assert.Equal(t, naming.Namespace("team-a"), in["metadata"].(map[string]any)["namespace"])
	assert.Equal(t, map[string]any{
		"endpointSelector": map[string]any{},
		"egress": []any{map[string]any{
			"toEntities": []any{"kube-apiserver"},
			"toPorts":    []any{map[string]any{"ports": []any{map[string]any{"port": "6443", "protocol": "TCP"}}}},
		}},
	}, in["spec"])
}
