package tenancy

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	networkingv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/networking/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MetadataCIDRs are the cloud instance metadata endpoints, which hand out node credentials and cloud identity: tenant
// egress always excludes every one of them, whatever the cloud, IPv4 and IPv6. Not all of 169.254.0.0/16: node-local
// DNS caches live there (https://kubernetes.io/docs/tasks/administer-cluster/nodelocaldns/, 169.254.20.10). Not Azure's
// WireServer (168.63.129.16) either, which also answers pods' DNS on host DNS there (docs/security.md, "DNS and metadata").
var MetadataCIDRs = []string{
	// GCE, AWS, Azure, OpenStack and most clouds
	// (https://cloud.google.com/compute/docs/metadata/querying-metadata,
	// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html,
	// https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service,
	// https://docs.openstack.org/nova/latest/admin/metadata-service.html).
	"169.254.169.254/32",
	// GKE's metadata server for Workload Identity (https://cloud.google.com/kubernetes-engine/docs/how-to/network-policy).
	"169.254.169.252/32",
	// Scaleway (https://docs.cloud-init.io/en/latest/reference/datasources/scaleway.html).
	"169.254.42.42/32",
	// Alibaba Cloud ECS (https://www.alibabacloud.com/help/ecs/user-guide/overview-of-ecs-instance-metadata).
	"100.100.100.200/32",
	// Tencent Cloud CVM (https://www.tencentcloud.com/document/product/213/4934).
	"169.254.0.23/32",
	// AWS EKS Pod Identity Agent (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html).
	"169.254.170.23/32",
	// AWS IMDS over IPv6 (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html).
	"fd00:ec2::254/128",
	// AWS EKS Pod Identity Agent over IPv6 (same page as its IPv4 address).
	"fd00:ec2::23/128",
	// GCE on IPv6-only VMs: found in public SSRF block lists, not in the Google pages read (UNCONFIRMED); blocking
	// an address nobody else uses costs nothing.
	"fd20:ce::254/128",
	// Scaleway over IPv6 (https://docs.cloud-init.io/en/latest/reference/datasources/scaleway.html).
	"fd00:42::42/128",
	// OpenStack over IPv6, from Nova 22.0.0 (https://docs.openstack.org/nova/latest/admin/metadata-service.html).
	"fe80::a9fe:a9fe/128",
}

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

// PlatformIngressPolicy admits the vCluster Platform's namespace, which proxies to the tenant's vCluster API; a tenant
// whose vCluster connects to no platform has none. Its resource is named <tenant>-PlatformIngressPolicy.
const PlatformIngressPolicy = "allow-ingress-platform"

// NetworkArgs are the network settings every tenant namespace shares: ingress is denied except from the same
// namespace (so from no other tenant) and IngressFromNamespaces; egress is allowed to the internet except the metadata
// endpoints and each tenant's blocked CIDRs, to DNS, within the namespace and to the API server.
type NetworkArgs struct {
	// APIServerCIDRs are the API server endpoint addresses, which the vCluster control plane must reach. They are
	// cluster specific (GKE: the control plane endpoint IP; Kapsule: the apiserver endpoint; kubeadm: the control
	// plane nodes) and need listing only when blocked CIDRs would cover them: the egress rules add up.
	APIServerCIDRs []string
	// APIServerPorts default to DefaultAPIServerPorts.
	APIServerPorts []int
	// PodCIDRs are the cluster's pod ranges, which every tenant's egress to the internet excludes: whether an ipBlock
	// matches pod addresses is the network plugin's choice (kube-router's and Calico's do; Cilium's never), and where
	// it does, 0.0.0.0/0 reaches the pods of every namespace that admits ingress from anywhere, a platform namespace
	// without a policy of its own among them. With them excluded a tenant's pods reach, inside the cluster, their own
	// namespace, DNS and the API server only, whichever plugin enforces (docs/threat-model.md, "Cloud identity and
	// node services").
	PodCIDRs []string
	// IngressFromNamespaces may reach the tenant's pods, for example the vCluster Platform's namespace that proxies
	// to the vCluster API, or an ingress controller's.
	IngressFromNamespaces []string
	// APIClientCIDRs are addresses outside the cluster that may reach the tenant's pods on APIClientPort, the
	// vCluster API's port, and on no other: clients of a vCluster reached directly (vcluster.Settings.APIClientCIDRs).
	// Every pod of the namespace on that port, since a selector on the vCluster pod's labels would not narrow it
	// against the tenant, whose syncer writes its pods' labels (docs/threat-model.md).
	APIClientCIDRs []string
	APIClientPort  int
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
	apiClients           []string
	apiClientPort        int
	cilium               bool
}

// Validate checks the shared settings.
func (n NetworkArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range n.APIServerCIDRs {
		errs = append(errs, fieldcheck.CIDR(path.Child("apiServerCIDRs").Index(i), c)...)
	}
	for i, p := range n.APIServerPorts {
		if p < 1 || p > 65535 {
			errs = append(errs, field.Invalid(path.Child("apiServerPorts").Index(i), p, "must be a port between 1 and 65535"))
		}
	}
	for i, c := range n.PodCIDRs {
		errs = append(errs, validateBlockedCIDR(path.Child("podCIDRs").Index(i), c)...)
	}
	for i, ns := range n.IngressFromNamespaces {
		errs = append(errs, fieldcheck.DNSLabel(path.Child("ingressFromNamespaces").Index(i), ns, validation.DNS1123LabelMaxLength)...)
	}
	return errs
}

// policyConfig is what a tenant's policies need: the shared settings plus the tenant's own blocked CIDRs, which
// must be valid (validateBlockedCIDR).
func (n NetworkArgs) policyConfig(blocked []string) networkConfig {
	cfg := networkConfig{
		apiServerCIDRs: n.APIServerCIDRs,
		apiServerPorts: n.APIServerPorts,
		ingressFrom:    n.IngressFromNamespaces,
		apiClients:     n.APIClientCIDRs,
		apiClientPort:  n.APIClientPort,
		cilium:         n.CiliumAPIServerAccess,
	}
	if len(cfg.apiServerPorts) == 0 {
		cfg.apiServerPorts = DefaultAPIServerPorts
	}
	seen := map[string]bool{}
	for _, c := range slices.Concat(MetadataCIDRs, n.PodCIDRs, blocked) {
		if seen[c] {
			continue
		}
		seen[c] = true
		if netip.MustParsePrefix(c).Addr().Is4() {
			cfg.blockedV4 = append(cfg.blockedV4, c)
		} else {
			cfg.blockedV6 = append(cfg.blockedV6, c)
		}
	}
	return cfg
}

// validateBlockedCIDR is fieldcheck.CIDR plus: ipBlock.except must lie strictly inside the allowed range, so a /0
// cannot be blocked.
func validateBlockedCIDR(path *field.Path, c string) field.ErrorList {
	return fieldcheck.NarrowCIDR(path, c, "would block all egress")
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
			name:    PlatformIngressPolicy,
			types:   []string{"Ingress"},
			ingress: networkingv1.NetworkPolicyIngressRuleArray{networkingv1.NetworkPolicyIngressRuleArgs{From: from}},
		})
	}
	if len(cfg.apiClients) > 0 {
		var from networkingv1.NetworkPolicyPeerArray
		for _, c := range cfg.apiClients {
			from = append(from, networkingv1.NetworkPolicyPeerArgs{IpBlock: &networkingv1.IPBlockArgs{Cidr: pulumi.String(c)}})
		}
		policies = append(policies, networkPolicy{
			name:  "allow-ingress-api-clients",
			types: []string{"Ingress"},
			ingress: networkingv1.NetworkPolicyIngressRuleArray{networkingv1.NetworkPolicyIngressRuleArgs{
				From: from, Ports: networkingv1.NetworkPolicyPortArray{tcpOrUDP("TCP", cfg.apiClientPort)},
			}},
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

func newNetworkPolicies(ctx *pulumi.Context, name string, cfg networkConfig, namespace pulumi.StringOutput, opts ...pulumi.ResourceOption) error {
	for _, p := range networkPolicies(cfg) {
		_, err := networkingv1.NewNetworkPolicy(ctx, name+"-"+p.name, &networkingv1.NetworkPolicyArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(p.name), Namespace: namespace, Labels: managedLabels(nil)},
			Spec: &networkingv1.NetworkPolicySpecArgs{
				PodSelector: metav1.LabelSelectorArgs{},
				PolicyTypes: pulumi.ToStringArray(p.types),
				Ingress:     p.ingress,
				Egress:      p.egress,
			},
		}, opts...)
		if err != nil {
			return fmt.Errorf("creating NetworkPolicy %q: %w", p.name, err)
		}
	}
	if cfg.cilium {
		return newCiliumAPIServerPolicy(ctx, name, cfg, namespace, opts...)
	}
	return nil
}

// newCiliumAPIServerPolicy allows egress to Cilium's kube-apiserver entity, which stands for the API server wherever
// it runs (docs.cilium.io policy language, Entities).
func newCiliumAPIServerPolicy(ctx *pulumi.Context, name string, cfg networkConfig, namespace pulumi.StringOutput, opts ...pulumi.ResourceOption) error {
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
	}, opts...)
	if err != nil {
		return fmt.Errorf("creating CiliumNetworkPolicy %q: %w", policyName, err)
	}
	return nil
}
