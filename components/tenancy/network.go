package tenancy

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	networkingv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/networking/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// MetadataCIDR is the cloud instance metadata endpoint (GCE, Scaleway, and most clouds); pods reaching it could read
// node credentials, so tenant egress always excludes it.
const MetadataCIDR = "169.254.169.254/32"

// DNS pods every tenant may query: the cluster DNS in kube-system, labelled k8s-app=kube-dns on GKE (kube-dns) and on
// CoreDNS installs alike. Allowed by selector because Cilium (Scaleway, GKE Dataplane V2) never matches pod IPs with
// ipBlock.
const (
	dnsNamespace = "kube-system"
	dnsPodLabel  = "k8s-app"
	dnsPodValue  = "kube-dns"
	// namespaceNameLabel is set by the API server on every namespace (Kubernetes >= 1.22).
	namespaceNameLabel = "kubernetes.io/metadata.name"
)

// DefaultAPIServerPorts are the API server's usual endpoint ports: 443 (GKE) and 6443 (kubeadm-style, Kapsule).
var DefaultAPIServerPorts = []int{443, 6443}

// NetworkArgs configure a tenant namespace's network policies. Ingress is denied except from the same namespace
// (so from no other tenant); egress is allowed to the internet except MetadataCIDR and BlockedEgressCIDRs, to DNS,
// within the namespace and to the API server.
type NetworkArgs struct {
	// BlockedEgressCIDRs are further destinations tenants may not reach (node or VPC ranges, other clouds' metadata
	// addresses); IPv4 and IPv6 both work.
	BlockedEgressCIDRs []string
	// APIServerCIDRs are the API server endpoint addresses, which the vCluster control plane must reach. They are
	// cluster specific (GKE: the control plane endpoint IP; Kapsule: the apiserver endpoint; kubeadm: the control
	// plane nodes) and need listing only when BlockedEgressCIDRs would cover them: the egress rules add up.
	APIServerCIDRs []string
	// APIServerPorts default to DefaultAPIServerPorts.
	APIServerPorts []int
	// IngressFromNamespaces may reach the tenant's pods, for example the vCluster Platform's namespace that proxies
	// to the vCluster API, or an ingress controller's.
	IngressFromNamespaces []string
	// CiliumAPIServerAccess adds a CiliumNetworkPolicy allowing egress to Cilium's kube-apiserver entity. Cilium
	// gives the API server a reserved identity that ipBlock rules may not match (cilium/cilium#20550), so on Cilium
	// clusters without it the vCluster may not reach the host API server. Needs the CiliumNetworkPolicy CRD.
	CiliumAPIServerAccess bool
}

type networkConfig struct {
	blockedV4, blockedV6 []string
	apiServerCIDRs       []string
	apiServerPorts       []int
	ingressFrom          []string
	cilium               bool
}

func (n NetworkArgs) resolve() (networkConfig, error) {
	cfg := networkConfig{
		blockedV4:      []string{MetadataCIDR},
		apiServerPorts: n.APIServerPorts,
		ingressFrom:    n.IngressFromNamespaces,
		cilium:         n.CiliumAPIServerAccess,
	}
	if len(cfg.apiServerPorts) == 0 {
		cfg.apiServerPorts = DefaultAPIServerPorts
	}
	var errs []error
	for _, c := range n.BlockedEgressCIDRs {
		p, err := parseCIDR("blocked egress CIDR", c)
		switch {
		case err != nil:
			errs = append(errs, err)
		case p.Bits() == 0:
			// ipBlock.except must lie strictly inside the allowed range.
			errs = append(errs, fmt.Errorf("blocked egress CIDR %q would block all egress", c))
		case p.Addr().Is4():
			cfg.blockedV4 = append(cfg.blockedV4, c)
		default:
			cfg.blockedV6 = append(cfg.blockedV6, c)
		}
	}
	for _, c := range n.APIServerCIDRs {
		if _, err := parseCIDR("API server CIDR", c); err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.apiServerCIDRs = append(cfg.apiServerCIDRs, c)
	}
	for _, p := range cfg.apiServerPorts {
		if p < 1 || p > 65535 {
			errs = append(errs, fmt.Errorf("API server port %d is not between 1 and 65535", p))
		}
	}
	for _, ns := range n.IngressFromNamespaces {
		if len(ns) > 63 || !dnsLabel.MatchString(ns) {
			errs = append(errs, fmt.Errorf("ingress namespace %q is not a namespace name", ns))
		}
	}
	return cfg, errors.Join(errs...)
}

// parseCIDR accepts only canonical prefixes (no host bits), as the API server's strict CIDR validation does.
func parseCIDR(what, c string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(c)
	if err != nil {
		return p, fmt.Errorf("%s %q is not a CIDR", what, c)
	}
	if p != p.Masked() {
		return p, fmt.Errorf("%s %q has host bits set; use %s", what, c, p.Masked())
	}
	return p, nil
}

type networkPolicy struct {
	name    string
	ingress networkingv1.NetworkPolicyIngressRuleArray
	egress  networkingv1.NetworkPolicyEgressRuleArray
	types   []string
}

// networkPolicies lists the namespace's policies. Kubernetes NetworkPolicies add up: deny-all isolates every pod in
// both directions and each further policy opens one kind of traffic.
func networkPolicies(cfg networkConfig) []networkPolicy {
	everyPod := &metav1.LabelSelectorArgs{}
	both := []string{"Ingress", "Egress"}
	sameNamespace := networkingv1.NetworkPolicyPeerArray{networkingv1.NetworkPolicyPeerArgs{PodSelector: everyPod}}
	dnsPorts := networkingv1.NetworkPolicyPortArray{tcpOrUDP("UDP", 53), tcpOrUDP("TCP", 53)}
	internet := networkingv1.NetworkPolicyPeerArray{
		networkingv1.NetworkPolicyPeerArgs{IpBlock: &networkingv1.IPBlockArgs{
			Cidr: pulumi.String("0.0.0.0/0"), Except: pulumi.ToStringArray(cfg.blockedV4),
		}},
		networkingv1.NetworkPolicyPeerArgs{IpBlock: &networkingv1.IPBlockArgs{
			Cidr: pulumi.String("::/0"), Except: pulumi.ToStringArray(cfg.blockedV6),
		}},
	}
	policies := []networkPolicy{
		{name: "deny-all", types: both},
		{
			name:    "allow-same-namespace",
			types:   both,
			ingress: networkingv1.NetworkPolicyIngressRuleArray{networkingv1.NetworkPolicyIngressRuleArgs{From: sameNamespace}},
			egress:  networkingv1.NetworkPolicyEgressRuleArray{networkingv1.NetworkPolicyEgressRuleArgs{To: sameNamespace}},
		},
		{
			name:  "allow-dns",
			types: []string{"Egress"},
			egress: networkingv1.NetworkPolicyEgressRuleArray{networkingv1.NetworkPolicyEgressRuleArgs{
				To: networkingv1.NetworkPolicyPeerArray{networkingv1.NetworkPolicyPeerArgs{
					NamespaceSelector: matchLabels(namespaceNameLabel, dnsNamespace),
					PodSelector:       matchLabels(dnsPodLabel, dnsPodValue),
				}},
				Ports: dnsPorts,
			}},
		},
		{
			name:   "allow-egress-internet",
			types:  []string{"Egress"},
			egress: networkingv1.NetworkPolicyEgressRuleArray{networkingv1.NetworkPolicyEgressRuleArgs{To: internet}},
		},
	}
	if len(cfg.apiServerCIDRs) > 0 {
		var to networkingv1.NetworkPolicyPeerArray
		for _, c := range cfg.apiServerCIDRs {
			to = append(to, networkingv1.NetworkPolicyPeerArgs{IpBlock: &networkingv1.IPBlockArgs{Cidr: pulumi.String(c)}})
		}
		var ports networkingv1.NetworkPolicyPortArray
		for _, p := range cfg.apiServerPorts {
			ports = append(ports, tcpOrUDP("TCP", p))
		}
		policies = append(policies, networkPolicy{
			name:   "allow-egress-apiserver",
			types:  []string{"Egress"},
			egress: networkingv1.NetworkPolicyEgressRuleArray{networkingv1.NetworkPolicyEgressRuleArgs{To: to, Ports: ports}},
		})
	}
	if len(cfg.ingressFrom) > 0 {
		var from networkingv1.NetworkPolicyPeerArray
		for _, ns := range cfg.ingressFrom {
			from = append(from, networkingv1.NetworkPolicyPeerArgs{NamespaceSelector: matchLabels(namespaceNameLabel, ns)})
		}
		policies = append(policies, networkPolicy{
			name:    "allow-ingress-platform",
			types:   []string{"Ingress"},
			ingress: networkingv1.NetworkPolicyIngressRuleArray{networkingv1.NetworkPolicyIngressRuleArgs{From: from}},
		})
	}
	return policies
}

func matchLabels(key, value string) *metav1.LabelSelectorArgs {
	return &metav1.LabelSelectorArgs{MatchLabels: pulumi.StringMap{key: pulumi.String(value)}}
}

func tcpOrUDP(protocol string, port int) networkingv1.NetworkPolicyPortArgs {
	return networkingv1.NetworkPolicyPortArgs{Protocol: pulumi.String(protocol), Port: pulumi.Int(port)}
}

func newNetworkPolicies(ctx *pulumi.Context, name string, cfg networkConfig, namespace pulumi.StringOutput, parent pulumi.Resource) error {
	for _, p := range networkPolicies(cfg) {
		_, err := networkingv1.NewNetworkPolicy(ctx, name+"-"+p.name, &networkingv1.NetworkPolicyArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(p.name), Namespace: namespace, Labels: managedLabels(nil)},
			Spec: &networkingv1.NetworkPolicySpecArgs{
				PodSelector: metav1.LabelSelectorArgs{},
				PolicyTypes: pulumi.ToStringArray(p.types),
				Ingress:     p.ingress,
				Egress:      p.egress,
			},
		}, pulumi.Parent(parent))
		if err != nil {
			return fmt.Errorf("creating NetworkPolicy %q: %w", p.name, err)
		}
	}
	if cfg.cilium {
		return newCiliumAPIServerPolicy(ctx, name, cfg, namespace, parent)
	}
	return nil
}

// newCiliumAPIServerPolicy allows egress to Cilium's kube-apiserver entity, which stands for the API server wherever
// it runs (docs.cilium.io policy language, Entities).
func newCiliumAPIServerPolicy(ctx *pulumi.Context, name string, cfg networkConfig, namespace pulumi.StringOutput, parent pulumi.Resource) error {
	var ports []any
	for _, p := range cfg.apiServerPorts {
		ports = append(ports, map[string]any{"port": fmt.Sprint(p), "protocol": "TCP"})
	}
	const policyName = "allow-egress-kube-apiserver"
	_, err := apiextensions.NewCustomResource(ctx, name+"-"+policyName, &apiextensions.CustomResourceArgs{
		ApiVersion: pulumi.String("cilium.io/v2"),
		Kind:       pulumi.String("CiliumNetworkPolicy"),
		Metadata:   &metav1.ObjectMetaArgs{Name: pulumi.String(policyName), Namespace: namespace, Labels: managedLabels(nil)},
		OtherFields: kubernetes.UntypedArgs{"spec": map[string]any{
			"endpointSelector": map[string]any{},
			"egress": []any{map[string]any{
				"toEntities": []any{"kube-apiserver"},
				"toPorts":    []any{map[string]any{"ports": ports}},
			}},
		}},
	}, pulumi.Parent(parent))
	if err != nil {
		return fmt.Errorf("creating CiliumNetworkPolicy %q: %w", policyName, err)
	}
	return nil
}
