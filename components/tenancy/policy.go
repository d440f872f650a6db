package tenancy

import (
	"fmt"
	"regexp"
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
	// ExtendedResourcePolicy refuses tenant pods that request GPUs as extended resources, a path that bypasses
	// claims and so the grant check (k8s.io/api v0.34.4 resource/v1/types.go DeviceClassSpec.ExtendedResourceName,
	// ResourceDeviceClassPrefix).
	ExtendedResourcePolicy = "gpu-tenancy-no-gpu-extended-resources"
)

// RuntimeEnvVars are the NVIDIA container runtime's variables that select devices or driver capabilities outside
// DRA: with the NVIDIA Container Toolkit's default accept-nvidia-visible-devices-envvar-when-unprivileged=true, a
// container setting them gets the GPUs they name, whatever its claims (NVIDIA/nvidia-container-toolkit v1.20.2
// internal/config/image/cuda_image.go VisibleDevices; https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html).
var RuntimeEnvVars = []string{"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_MIG_CONFIG_DEVICES",
	"NVIDIA_MIG_MONITOR_DEVICES"}

// gpuExtendedResourcePrefixes are the extended-resource names that reach GPUs without a claim: the driver class's
// extendedResourceName nvidia.com/gpu (and the device plugin's nvidia.com/* names) and DRA's implicit
// deviceclass.resource.kubernetes.io/<class> (dra-driver-nvidia-gpu v0.4.0 templates/deviceclass-gpu.yaml).
var gpuExtendedResourcePrefixes = []string{"nvidia.com/", "deviceclass.resource.kubernetes.io/"}

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
)

// entitlementPolicy lets a tenant's namespace name only its granted classes in claims and templates, in every field
// that names a DeviceClass in resource.k8s.io/v1 (exactly.deviceClassName, firstAvailable[*].deviceClassName:
// k8s.io/api v0.34.4 resource/v1/types.go DeviceRequest, ExactDeviceRequest, DeviceSubRequest), and never
// adminAccess. Requests in v1beta1 and v1beta2 are converted to v1 first (matchPolicy Equivalent: k8s.io/apiserver
// v0.34.4 pkg/admission/plugin/policy/matching/matching.go). On the status subresource it refuses a new allocation
// or reservation of a claim that names a class no longer granted, so a revoked grant stops new pods on old claims.
func entitlementPolicy(tenant string, granted []string) admissionPolicy {
	return admissionPolicy{
		name: naming.EntitlementPolicy(tenant),
		rules: []admissionRule{
			{group: "resource.k8s.io", resources: []string{"resourceclaims", "resourceclaimtemplates"}, operations: createUpdate},
			{group: "resource.k8s.io", resources: []string{"resourceclaims/status"}, operations: update},
		},
		matchConditions: []celNamed{{"claim-created-changed-or-reserved", `request.?subResource.orValue('') == 'status'
	? (object.?status.?allocation.hasValue() && !oldObject.?status.?allocation.hasValue()) ||
		object.?status.?reservedFor.orValue([]).exists(r, !(r in oldObject.?status.?reservedFor.orValue([])))
	: ` + celCreatedOrSpecChanged}},
		variables: []celNamed{
			{"tenant", `$TENANT`},
			{"granted", `$GRANTED`},
			{"spec", celSpec},
			{"requests", celRequests},
			{"requestClasses", celRequestClasses},
			{"deniedClasses", `variables.requestClasses
	.map(cs, cs.filter(c, !(c in variables.granted)))
	.filter(cs, size(cs) > 0)
	.map(cs, cs.join(', '))`},
			{"adminRequests", `request.?subResource.orValue('') == 'status' ? [] : variables.requests
	.filter(r, has(r.exactly) && r.exactly.?adminAccess.orValue(false) == true)
	.map(r, r.name)`},
		},
		validations: []celValidation{
			{
				expression: `size(variables.deniedClasses) == 0`,
				message: `request.?subResource.orValue('') == 'status'
	? 'claim ' + object.metadata.name + ' of tenant ' + variables.tenant + ' names DeviceClass ' +
		variables.deniedClasses.join(', ') + ', which is no longer granted to the tenant: no pod may start using it'
	: 'tenant ' + variables.tenant + ' is not granted DeviceClass ' + variables.deniedClasses.join(', ') +
		'; its classes are the DeviceClasses labelled ' + $CLASS_LABEL_PREFIX + variables.tenant + '=true'`,
			},
			{
				expression: `size(variables.adminRequests) == 0`,
				message: `'tenant ' + variables.tenant + ' may not request adminAccess to devices (request ' +
	variables.adminRequests.join(', ') + ')'`,
			},
		},
		literals: map[string]string{
			"TENANT": celString(tenant), "GRANTED": celList(granted), "CLASS_LABEL_PREFIX": celString(naming.ClassTenantLabelPrefix),
		},
	}
}

// claimNamespacePolicy fails closed: a claim or template naming a catalog class or one of the NVIDIA driver's
// classes is refused in any namespace that is not exactly one tenant's host namespace (its name and tenant label
// agreeing, for a tenant that exists). The binding leaves out the platform namespaces.
func claimNamespacePolicy(classes, tenants []string) admissionPolicy {
	return admissionPolicy{
		name:            ClaimNamespacePolicy,
		rules:           []admissionRule{{group: "resource.k8s.io", resources: []string{"resourceclaims", "resourceclaimtemplates"}, operations: createUpdate}},
		matchConditions: []celNamed{{"created-or-spec-changed", celCreatedOrSpecChanged}},
		variables: []celNamed{
			{"spec", celSpec},
			{"requests", celRequests},
			{"requestClasses", celRequestClasses},
			{"gpuClasses", `variables.requestClasses
	.map(cs, cs.filter(c, c in $CATALOG_CLASSES || c == $DRIVER_DOMAIN || c.endsWith($DRIVER_CLASS_SUFFIX)))
	.filter(cs, size(cs) > 0)
	.map(cs, cs.join(', '))`},
			{"tenant", `namespaceObject.metadata.?labels[?$TENANT_LABEL].orValue('')`},
			{"tenantNamespace", `variables.tenant in $TENANTS && namespaceObject.metadata.name == $NAMESPACE_PREFIX + variables.tenant`},
		},
		validations: []celValidation{{
			expression: `size(variables.gpuClasses) == 0 || variables.tenantNamespace`,
			message: `'namespace ' + namespaceObject.metadata.name + ' is not a tenant host namespace: DeviceClass ' +
	variables.gpuClasses.join(', ') + ' may be claimed only in ' + $NAMESPACE_PREFIX + '<tenant> labelled ' +
	$TENANT_LABEL + '=<tenant> for a tenant of the platform, or in a platform namespace'`,
		}},
		literals: map[string]string{
			"CATALOG_CLASSES": celList(classes), "TENANTS": celList(tenants), "TENANT_LABEL": celString(naming.TenantNamespaceLabel),
			"NAMESPACE_PREFIX": celString(naming.NamespacePrefix), "DRIVER_CLASS_SUFFIX": celString(naming.DriverClassSuffix),
			"DRIVER_DOMAIN": celString(strings.TrimPrefix(naming.DriverClassSuffix, ".")),
		},
	}
}

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

// claimStatusPolicy: on Kubernetes 1.34 and 1.35 nothing checks that a claim's allocation matches its class or that
// the device is free, and RBAC lets anyone with update on resourceclaims/status write it; the vCluster chart grants
// each tenant's syncer exactly that in its host namespace (loft-sh/vcluster v0.36.1 chart/templates/role.yaml). Only
// the writers named here may change status.allocation or status.reservedFor: the scheduler allocates and reserves
// (kubernetes v1.34.4 pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go bindClaim, Unreserve),
// the resource-claim controller reserves and releases (pkg/controller/resourceclaim/controller.go). The DRA
// driver's status.devices stays writable.
func claimStatusPolicy(writers []string) admissionPolicy {
	return admissionPolicy{
		name:  ClaimStatusPolicy,
		rules: []admissionRule{{group: "resource.k8s.io", resources: []string{"resourceclaims/status"}, operations: update}},
		matchConditions: []celNamed{{"allocation-or-reservations-changed", `object.?status.?allocation.hasValue() != oldObject.?status.?allocation.hasValue() ||
	(object.?status.?allocation.hasValue() && object.status.allocation != oldObject.status.allocation) ||
	object.?status.?reservedFor.orValue([]) != oldObject.?status.?reservedFor.orValue([])`}},
		validations: []celValidation{{
			expression: `request.userInfo.username in $WRITERS`,
			message: `'only ' + $WRITERS.join(', ') + ' may change the allocation or reservations of ResourceClaim ' +
	object.metadata.namespace + '/' + object.metadata.name + '; ' + request.userInfo.username + ' may not'`,
		}},
		literals: map[string]string{"WRITERS": celList(writers)},
	}
}

// runtimeEnvPolicy refuses tenant containers, init containers and ephemeral containers that set an NVIDIA runtime
// variable by name, or take variables through envFrom with a prefix that, followed by a key, can spell one.
// (Keys of ConfigMaps and Secrets without a prefix are runtimeEnvKeysPolicy's; a variable's value may come from
// anywhere, its name is always in the pod.) Checked when a pod is created and when ephemeral containers are added:
// containers are immutable otherwise.
var runtimeEnvPolicy = admissionPolicy{
	name: RuntimeEnvPolicy,
	rules: []admissionRule{
		{group: "", resources: []string{"pods"}, operations: createUpdate},
		{group: "", resources: []string{"pods/ephemeralcontainers"}, operations: update},
	},
	matchConditions: []celNamed{{"containers-added", `request.operation == 'CREATE' || request.?subResource.orValue('') == 'ephemeralcontainers'`}},
	variables: []celNamed{
		{"tenant", `namespaceObject.metadata.?labels[?$TENANT_LABEL].orValue(namespaceObject.metadata.name)`},
		{"containers", `object.spec.?containers.orValue([]) + object.spec.?initContainers.orValue([]) +
	object.spec.?ephemeralContainers.orValue([])`},
		{"byName", `variables.containers
	.filter(c, c.?env.orValue([]).exists(e, e.name in $RUNTIME_ENV))
	.map(c, c.name)`},
		{"byPrefix", `variables.containers
	.filter(c, c.?envFrom.orValue([]).exists(f, f.?prefix.orValue('') != '' && $RUNTIME_ENV.exists(v, v.startsWith(f.prefix))))
	.map(c, c.name)`},
	},
	validations: []celValidation{
		{
			expression: `size(variables.byName) == 0`,
			message: `'tenant ' + variables.tenant + ': containers ' + variables.byName.join(', ') +
	' set NVIDIA runtime variables (' + $RUNTIME_ENV.join(', ') + '), which expose GPUs outside DRA; claim a granted DeviceClass instead'`,
		},
		{
			expression: `size(variables.byPrefix) == 0`,
			message: `'tenant ' + variables.tenant + ': containers ' + variables.byPrefix.join(', ') +
	' take envFrom with a prefix that can spell an NVIDIA runtime variable (' + $RUNTIME_ENV.join(', ') + ')'`,
		},
	},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "RUNTIME_ENV": celList(RuntimeEnvVars)},
}

// runtimeEnvKeysPolicy refuses, in tenant namespaces, ConfigMaps and Secrets with a data key named like an NVIDIA
// runtime variable: envFrom without a prefix turns every data key into a variable, and admission cannot read a
// ConfigMap from a pod (the kubelet reads data only, not binaryData: kubernetes v1.34.4
// pkg/kubelet/kubelet_pods.go makeEnvironmentVariables).
var runtimeEnvKeysPolicy = admissionPolicy{
	name:  RuntimeEnvKeysPolicy,
	rules: []admissionRule{{group: "", resources: []string{"configmaps", "secrets"}, operations: createUpdate}},
	variables: []celNamed{
		{"tenant", `namespaceObject.metadata.?labels[?$TENANT_LABEL].orValue(namespaceObject.metadata.name)`},
		{"keys", `object.?data.orValue({}).map(k, k).filter(k, k in $RUNTIME_ENV)`},
	},
	validations: []celValidation{{
		expression: `size(variables.keys) == 0`,
		message: `'tenant ' + variables.tenant + ': ' + request.kind.kind + ' ' + object.metadata.name + ' has keys ' +
	variables.keys.join(', ') + ', names of NVIDIA runtime variables that envFrom would set in a container, exposing GPUs outside DRA'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "RUNTIME_ENV": celList(RuntimeEnvVars)},
}

// extendedResourcePolicy refuses GPU extended resources in container requests and limits; limits count too because
// an extended resource's request defaults to its limit.
var extendedResourcePolicy = admissionPolicy{
	name:  ExtendedResourcePolicy,
	rules: []admissionRule{{group: "", resources: []string{"pods"}, operations: createUpdate}},
	// Containers' resources change only through pods/resize, which this rule does not match.
	matchConditions: []celNamed{{"created-or-spec-changed", celCreatedOrSpecChanged}},
	variables: []celNamed{
		{"tenant", `namespaceObject.metadata.?labels[?$TENANT_LABEL].orValue(namespaceObject.metadata.name)`},
		{"offending", `(object.spec.?containers.orValue([]) + object.spec.?initContainers.orValue([]))
	.filter(c, [c.?resources.?requests.orValue({}), c.?resources.?limits.orValue({})]
		.exists(m, m.exists(k, $PREFIXES.exists(p, k.startsWith(p)))))
	.map(c, c.name)`},
	},
	validations: []celValidation{{
		expression: `size(variables.offending) == 0`,
		message: `'tenant ' + variables.tenant + ': containers ' + variables.offending.join(', ') +
	' request GPUs as extended resources (' + $PREFIXES.join('*, ') + '*); claim a granted DeviceClass through a ResourceClaim instead'`,
	}},
	literals: map[string]string{"TENANT_LABEL": celString(naming.TenantNamespaceLabel), "PREFIXES": celList(gpuExtendedResourcePrefixes)},
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
func (p admissionPolicy) binding(policy *admissionv1.ValidatingAdmissionPolicy, selector *metav1.LabelSelectorArgs,
	extraLabels map[string]string) *admissionv1.ValidatingAdmissionPolicyBindingArgs {
	spec := &admissionv1.ValidatingAdmissionPolicyBindingSpecArgs{
		PolicyName:        policy.Metadata.Name().Elem(),
		ValidationActions: pulumi.ToStringArray([]string{"Deny"}),
	}
	if selector != nil {
		spec.MatchResources = &admissionv1.MatchResourcesArgs{NamespaceSelector: selector}
	}
	return &admissionv1.ValidatingAdmissionPolicyBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(p.name), Labels: managedLabels(extraLabels)},
		Spec:     spec,
	}
}

// newPolicy creates the policy and its binding under parent.
func newPolicy(ctx *pulumi.Context, resourceName string, p admissionPolicy, selector *metav1.LabelSelectorArgs,
	extraLabels map[string]string, parent pulumi.Resource) (*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	policy, err := admissionv1.NewValidatingAdmissionPolicy(ctx, resourceName, p.args(), pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicy %q: %w", p.name, err)
	}
	binding, err := admissionv1.NewValidatingAdmissionPolicyBinding(ctx, resourceName, p.binding(policy, selector, extraLabels), pulumi.Parent(parent))
	if err != nil {
		return nil, fmt.Errorf("creating ValidatingAdmissionPolicyBinding %q: %w", p.name, err)
	}
	return binding, nil
}

// tenantNamespaces selects every tenant host namespace.
func tenantNamespaces() *metav1.LabelSelectorArgs {
	return &metav1.LabelSelectorArgs{MatchExpressions: metav1.LabelSelectorRequirementArray{metav1.LabelSelectorRequirementArgs{
		Key: pulumi.String(naming.TenantNamespaceLabel), Operator: pulumi.String("Exists"),
	}}}
}

// namespacesExcept selects every namespace but those named; nil (every namespace) when none are.
func namespacesExcept(names []string) *metav1.LabelSelectorArgs {
	if len(names) == 0 {
		return nil
	}
	return &metav1.LabelSelectorArgs{MatchExpressions: metav1.LabelSelectorRequirementArray{metav1.LabelSelectorRequirementArgs{
		Key: pulumi.String(namespaceNameLabel), Operator: pulumi.String("NotIn"), Values: pulumi.ToStringArray(names),
	}}}
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
