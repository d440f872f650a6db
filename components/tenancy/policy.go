package tenancy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// The admission policies. Each expression below is one CEL text; `$NAME` stands for a literal (a quoted string or a
// list of them) that render substitutes in one place, so no value is ever spliced into CEL unquoted. None takes
// params: a binding's ConfigMap params are read through an informer that kube-apiserver 1.34 tears down when no
// binding uses the param kind for a moment and never restarts (kubernetes/kubernetes#130887, #133827), after which
// revoked grants stay usable or every claim is denied. What a policy needs to know is compiled into it instead.

// Cluster-wide policy names; each tenant's entitlement policy is named by naming.EntitlementPolicy.
const (
	// ClaimNamespacePolicy refuses claims naming a GPU class outside a tenant's own host namespace.
	ClaimNamespacePolicy = "gpu-tenancy-claims-in-tenant-namespaces"
	// NamespaceLabelPolicy refuses the tenant label on any namespace but the tenant's host namespace.
	NamespaceLabelPolicy = "gpu-tenancy-tenant-namespace-label"
	// ClaimStatusPolicy lets only the scheduler and the resource-claim controller allocate or reserve claims.
	ClaimStatusPolicy = "gpu-tenancy-claim-status-writers"
	// RuntimeEnvPolicy refuses tenant containers that set NVIDIA runtime variables.
	RuntimeEnvPolicy = "gpu-tenancy-no-nvidia-runtime-env"
	// RuntimeEnvKeysPolicy refuses tenant ConfigMaps and Secrets whose keys envFrom would turn into them.
	RuntimeEnvKeysPolicy = "gpu-tenancy-no-nvidia-runtime-env-keys"
	// ExtendedResourcePolicy refuses tenant pods that request GPUs as extended resources, but the names of the
	// tenant's granted classes: the other names bypass the grant check (k8s.io/api v0.36.3 resource/v1/types.go
	// DeviceClassSpec.ExtendedResourceName, ResourceDeviceClassPrefix).
	ExtendedResourcePolicy = "gpu-tenancy-no-gpu-extended-resources"
	// ExtendedResourceClaimPolicy lets only the scheduler mark a tenant's claim as one it made for a pod's extended
	// resources, an annotation the quota reads.
	ExtendedResourceClaimPolicy = "gpu-tenancy-extended-resource-claims"
	// ExtendedResourceClassPolicy keeps the extended-resource names of DeviceClasses to the catalog's.
	ExtendedResourceClassPolicy = "gpu-tenancy-extended-resource-classes"
	// NodeDevicePolicy refuses tenant pods the ways to a node's devices that go around DRA: NVIDIA runtime classes,
	// CDI and CRI-O device annotations, the toolkit's device-list mounts.
	NodeDevicePolicy = "gpu-tenancy-no-node-device-paths"
	// PodPlacementPolicy keeps tenant pods to the scheduler, the taints they may tolerate and the priority classes
	// they may use.
	PodPlacementPolicy = "gpu-tenancy-pod-placement"
	// PodPhasePolicy refuses a tenant's identities writing the pod status fields the kubelet and the scheduler own:
	// the phase, the claim statuses, the nominated node, the container statuses and resize conditions, and others; and
	// changing a pod's labels, annotations or finalizers through the status subresource.
	PodPhasePolicy = "gpu-tenancy-pod-phase-from-kubelet"
	// GracefulDeletePolicy refuses a tenant's identities deleting a running pod without its grace period.
	GracefulDeletePolicy = "gpu-tenancy-pod-graceful-delete"
	// ClaimDeleteProtectionPolicy refuses a tenant's identities removing an allocated claim's finalizer.
	ClaimDeleteProtectionPolicy = "gpu-tenancy-claim-delete-protection"
	// ServicePolicy refuses tenant Services with externalIPs.
	ServicePolicy = "gpu-tenancy-service-external-ips"
	// VolumeClaimPolicy refuses tenant claims that bind an existing volume by name, label or the empty class.
	VolumeClaimPolicy = "gpu-tenancy-volume-claims-from-storage-classes"
	// PodVolumeTypesPolicy keeps tenant pods to the volume kinds Pod Security's restricted level allows, whatever the
	// namespace's level: no volume the node mounts from the network with its own credentials.
	PodVolumeTypesPolicy = "gpu-tenancy-pod-volume-types"
	// KubeconfigSecretPolicy refuses a tenant's identities deleting the Secret its vCluster exports its kubeconfig in.
	KubeconfigSecretPolicy = "gpu-tenancy-kubeconfig-secret"
	// PriorityClassPolicy bounds the PriorityClasses a tenant's vCluster writes to the host.
	PriorityClassPolicy = "gpu-tenancy-tenant-priority-classes"
	// ClaimShapePolicy bounds what one tenant claim may ask of the scheduler, and keeps driver configuration to the
	// class.
	ClaimShapePolicy = "gpu-tenancy-claim-shape"
	// EndpointsPolicy bounds the endpoints and ports one tenant object programs on every node.
	EndpointsPolicy = "gpu-tenancy-endpoint-size"
	// EventSizePolicy bounds the size of the events a tenant's identities write, which no quota measures.
	EventSizePolicy = "gpu-tenancy-event-size"
	// NodeLabelPolicy refuses a node's kubelet changing the labels that draw pods to its node: a tenant's dedicated
	// pool's and the platform pool's.
	NodeLabelPolicy = "gpu-tenancy-node-placement-labels"
)

// An empty subResource is left out of an admission request (k8s.io/api v0.34.4 admission/v1/types.go omitempty), so
// the policies read request.?subResource as optional.

// Shared CEL fragments: the requests of a claim or template and the class names each request may use. requests
// has no omitempty in k8s.io/api resource/v1, so an empty list arrives as null.
const (
	celSpec           = `request.resource.resource == 'resourceclaimtemplates' ? object.spec.spec : object.spec`
	celRequests       = `variables.spec.?devices.?requests.orValue(null) == null ? [] : variables.spec.devices.requests`
	celRequestClasses = `variables.requests.map(r, has(r.exactly)
	? [r.exactly.deviceClassName]
	: r.?firstAvailable.orValue([]).map(s, s.deviceClassName))`
	// Claims are checked when created and when their spec changes; a claim's spec is immutable today, so in effect
	// on CREATE. Controllers update claims admitted before a grant was revoked (finalizers, labels): denying those
	// would leave claims stuck in deletion.
	celCreatedOrSpecChanged = `request.operation == 'CREATE' || object.spec != oldObject.spec`
	// celTenantIdentity matches the service accounts of the request's namespace: in a tenant namespace, every
	// identity the tenant can hold, since its syncer may mint tokens for each of them (a Secret of type
	// kubernetes.io/service-account-token). The kubelet, the scheduler and the controllers have identities of their own.
	celTenantIdentity = `request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':')`
	celTenant         = `namespaceObject.metadata.?labels[?$TENANT_LABEL].orValue(namespaceObject.metadata.name)`
	// celTenantServiceAccount matches, on a cluster-scoped object where there is no namespace to bind by, a service
	// account of a tenant host namespace (not of a platform namespace that shares the prefix, such as
	// vcluster-platform); celTenantOfServiceAccount is its tenant.
	celTenantServiceAccount = `request.userInfo.username.startsWith('system:serviceaccount:' + $NAMESPACE_PREFIX) &&
	!(request.userInfo.username.split(':')[2] in $PLATFORM_NAMESPACES)`
	celTenantOfServiceAccount = `request.userInfo.username.split(':')[2].substring(size($NAMESPACE_PREFIX))`
)

// namespaceLabelPolicy keeps the tenant label on tenant host namespaces only: a namespace named otherwise that
// carried it would pass for the tenant's.
var namespaceLabelPolicy = admissionPolicy{
	name:            NamespaceLabelPolicy,
	rules:           []admissionRule{{group: "", resources: []string{"namespaces"}, operations: createUpdate}},
	matchConditions: []celNamed{{"has-tenant-label", `object.metadata.?labels[?$TENANT_LABEL].hasValue()`}},
	validations: []celValidation{{
		expression: `object.metadata.name == $NAMESPACE_PREFIX + object.metadata.labels[$TENANT_LABEL]`,
		message: `'namespace ' + object.metadata.name + ' may not carry ' + $TENANT_LABEL + '=' +
	object.metadata.labels[$TENANT_LABEL] + ': only that tenant\'s host namespace ' + $NAMESPACE_PREFIX +
	object.metadata.labels[$TENANT_LABEL] + ' carries it'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "NAMESPACE_PREFIX": celString(naming.NamespacePrefix)},
}

// nodeLabelPolicy: the labels that draw pods to a node, a pool dedicated to a tenant (naming.DedicatedNodeKey) and the
// platform's own pool (naming.PlatformPoolKey), are set by the cloud when it creates the pool's nodes, or by the
// operator, never changed by the node itself. A kubelet may change its own Node's labels but those under kubernetes.io
// and k8s.io other than its own (kubernetes v1.34.4 plugin/pkg/admission/noderestriction/admission.go), so labels
// such as gpu-tenancy.io/ are open to it, and a tenant who took a node's credentials could label that node
// as another tenant's or as the platform's and draw their pods, with their tokens and images, onto it. The node's
// registration (CREATE) is left alone: GKE and Kapsule label a pool's nodes through the kubelet's own flags when it
// registers. A node deleted and registered again by a compromised kubelet is beyond this guard (docs/threat-model.md).
var nodeLabelPolicy = admissionPolicy{
	name:            NodeLabelPolicy,
	rules:           []admissionRule{{group: "", resources: []string{"nodes", "nodes/status"}, operations: update}},
	matchConditions: []celNamed{{"a-node", `request.userInfo.username.startsWith('system:node:')`}},
	variables:       []celNamed{{"changed", `$KEYS.filter(k, object.metadata.?labels[?k] != oldObject.metadata.?labels[?k])`}},
	validations: []celValidation{{
		expression: `size(variables.changed) == 0`,
		message: `'node ' + object.metadata.name + ': ' + request.userInfo.username + ' may not change its labels ' +
	variables.changed.join(', ') + ': they draw a tenant\'s pods or the platform\'s to the node; the cloud or the operator sets them'`,
	}},
	literals: map[string]string{"KEYS": celList([]string{naming.DedicatedNodeKey, naming.PlatformPoolKey})},
}

type celNamed struct{ name, expression string }

type celValidation struct{ expression, message string }

type admissionRule struct {
	group      string
	resources  []string
	operations []string
}

var (
	createUpdate = []string{"CREATE", "UPDATE"}
	update       = []string{"UPDATE"}
	create       = []string{"CREATE"}
	remove       = []string{"DELETE"}
)

// admissionPolicy is a ValidatingAdmissionPolicy whose CEL texts use $NAME placeholders for literals.
type admissionPolicy struct {
	name            string
	rules           []admissionRule
	matchConditions []celNamed
	variables       []celNamed
	validations     []celValidation
	literals        map[string]string
}

var placeholder = regexp.MustCompile(`\$[A-Z_]+`)

// render substitutes the policy's literals into a CEL text. An unknown placeholder is left as it is, which no CEL
// compiler accepts: the unit tests compile every expression.
func (p admissionPolicy) render(text string) string {
	return placeholder.ReplaceAllStringFunc(text, func(m string) string {
		if lit, ok := p.literals[m[1:]]; ok {
			return lit
		}
		return m
	})
}

// args declares the policy. failurePolicy Fail: a policy that cannot be evaluated denies rather than admits.
func (p admissionPolicy) args() *admissionv1.ValidatingAdmissionPolicyArgs {
	var rules admissionv1.NamedRuleWithOperationsArray
	for _, r := range p.rules {
		rules = append(rules, admissionv1.NamedRuleWithOperationsArgs{
			ApiGroups:   pulumi.ToStringArray([]string{r.group}),
			ApiVersions: pulumi.ToStringArray([]string{"v1"}),
			Operations:  pulumi.ToStringArray(r.operations),
			Resources:   pulumi.ToStringArray(r.resources),
		})
	}
	var conditions admissionv1.MatchConditionArray
	for _, c := range p.matchConditions {
		conditions = append(conditions, admissionv1.MatchConditionArgs{Name: pulumi.String(c.name), Expression: pulumi.String(p.render(c.expression))})
	}
	var vars admissionv1.VariableArray
	for _, v := range p.variables {
		vars = append(vars, admissionv1.VariableArgs{Name: pulumi.String(v.name), Expression: pulumi.String(p.render(v.expression))})
	}
	var validations admissionv1.ValidationArray
	for _, v := range p.validations {
		validations = append(validations, admissionv1.ValidationArgs{
			Expression:        pulumi.String(p.render(v.expression)),
			MessageExpression: pulumi.String(p.render(v.message)),
			Reason:            pulumi.String("Forbidden"),
		})
	}
	return &admissionv1.ValidatingAdmissionPolicyArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(p.name), Labels: managedLabels(nil)},
		Spec: &admissionv1.ValidatingAdmissionPolicySpecArgs{
			FailurePolicy: pulumi.String("Fail"),
			MatchConstraints: &admissionv1.MatchResourcesArgs{
				MatchPolicy:   pulumi.String("Equivalent"),
				ResourceRules: rules,
			},
			MatchConditions: conditions,
			Variables:       vars,
			Validations:     validations,
		},
	}
}

// binding binds the policy with Deny to the namespaces selector picks (all when nil).
func (p admissionPolicy) binding(policy *admissionv1.ValidatingAdmissionPolicy, selector *metav1.LabelSelectorArgs) *admissionv1.ValidatingAdmissionPolicyBindingArgs {
	spec := &admissionv1.ValidatingAdmissionPolicyBindingSpecArgs{
		PolicyName:        policy.Metadata.Name().Elem(),
		ValidationActions: pulumi.ToStringArray([]string{"Deny"}),
	}
	if selector != nil {
		spec.MatchResources = &admissionv1.MatchResourcesArgs{NamespaceSelector: selector}
	}
	return &admissionv1.ValidatingAdmissionPolicyBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(p.name), Labels: managedLabels(nil)},
		Spec:     spec,
	}
}

// newPolicy creates the policy and its binding under parent.
func newPolicy(ctx *pulumi.Context, resourceName string, p admissionPolicy, selector *metav1.LabelSelectorArgs,
	parent pulumi.Resource) (*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	policy, err := admissionv1.NewValidatingAdmissionPolicy(ctx, resourceName, p.args(), pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicy %q: %w", p.name, err)
	}
	binding, err := admissionv1.NewValidatingAdmissionPolicyBinding(ctx, resourceName, p.binding(policy, selector), pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicyBinding %q: %w", p.name, err)
	}
	return binding, nil
}

// celMap writes a map of strings as a CEL map literal, its keys sorted so that the text is the same on every run.
func celMap(m map[string]string) string {
	entries := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		entries = append(entries, celString(k)+": "+celString(m[k]))
	}
	return "{" + strings.Join(entries, ", ") + "}"
}

func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = celString(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// managedLabels returns extra plus the managed-by label.
func managedLabels(extra map[string]string) pulumi.StringMap {
	m := pulumi.StringMap{naming.ManagedByLabel: pulumi.String(naming.ManagedBy)}
	for k, v := range extra {
		m[k] = pulumi.String(v)
	}
	return m
}
