package tenancy

import (
	"fmt"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// Admission policy names. Both policies are static: adding a tenant or a grant adds a binding and a grants ConfigMap
// (the policy's params) and never changes policy code.
const (
	// EntitlementPolicyName denies ResourceClaims and ResourceClaimTemplates that name a DeviceClass outside the
	// tenant's grant, or ask for adminAccess. Each tenant binds it with its own grants (see naming.EntitlementPolicy).
	EntitlementPolicyName = "gpu-tenancy-device-entitlements"
	// ExtendedResourcePolicyName denies pods in tenant namespaces that request GPUs as extended resources, a path
	// that bypasses claims and so the grant check (k8s.io/api v0.34.4 resource/v1/types.go
	// DeviceClassSpec.ExtendedResourceName, ResourceDeviceClassPrefix).
	ExtendedResourcePolicyName = "gpu-tenancy-no-gpu-extended-resources"
)

// specChanged limits UPDATE checks to spec changes. Controllers update claims and pods that were admitted before a
// grant was revoked or a policy existed (finalizer removal, labels); denying those would leave claims stuck in
// deletion. A claim's spec is immutable today, so in effect claims are checked on CREATE.
const specChanged = "request.operation != 'UPDATE' || object.spec != oldObject.spec"

// grantedValue is the value of each class key in a grants ConfigMap; only the keys matter to the policy.
const grantedValue = "granted"

// gpuExtendedResourcePrefixes are the extended-resource names that reach GPUs without a claim: the driver class's
// extendedResourceName nvidia.com/gpu (and the device plugin's nvidia.com/* names) and DRA's implicit
// deviceclass.resource.kubernetes.io/<class> (k8s.io/api v0.34.4 resource/v1/types.go ResourceDeviceClassPrefix;
// dra-driver-nvidia-gpu v0.4.0 templates/deviceclass-gpu.yaml extendedResourceName).
var gpuExtendedResourcePrefixes = []string{"nvidia.com/", "deviceclass.resource.kubernetes.io/"}

type celVariable struct{ name, expression string }

type celValidation struct{ expression, messageExpression, reason string }

type admissionPolicy struct {
	name       string
	rules      []admissionRule
	params     bool
	variables  []celVariable
	validation []celValidation
}

type admissionRule struct {
	group, version string
	resources      []string
}

// label reads a label of obj (a CEL expression) as an optional string.
func label(obj, key string) string {
	return fmt.Sprintf("%s.metadata.?labels[?%s]", obj, celString(key))
}

// entitlementPolicy checks every field that names a DeviceClass in resource.k8s.io/v1: exactly.deviceClassName and
// firstAvailable[*].deviceClassName, in claims and in templates (k8s.io/api v0.34.4 resource/v1/types.go DeviceRequest,
// ExactDeviceRequest, DeviceSubRequest). Requests in v1beta1/v1beta2 are
// converted to v1 before the check because of matchPolicy Equivalent (k8s.io/apiserver v0.34.4
// pkg/admission/plugin/policy/matching/matching.go matchesResourceRules, validating/dispatcher.go
// NewVersionedAttributes). params is the tenant's grants ConfigMap: one data key per granted class.
var entitlementPolicy = admissionPolicy{
	name:   EntitlementPolicyName,
	rules:  []admissionRule{{group: "resource.k8s.io", version: "v1", resources: []string{"resourceclaims", "resourceclaimtemplates"}}},
	params: true,
	variables: []celVariable{
		{"tenant", label("params", naming.TenantNamespaceLabel) + ".orValue(params.metadata.name)"},
		{"granted", "params.?data.orValue({})"},
		{"spec", "request.resource.resource == 'resourceclaimtemplates' ? object.spec.spec : object.spec"},
		// requests has no omitempty in k8s.io/api resource/v1, so an empty list arrives as null.
		{"requests", "variables.spec.?devices.?requests.orValue(null) == null ? [] : variables.spec.devices.requests"},
		// One list of class names per request: an exact request names one class, a prioritised list one per subrequest.
		{"requestClasses", "variables.requests.map(r, has(r.exactly) ? [r.exactly.deviceClassName] : " +
			"r.?firstAvailable.orValue([]).map(s, s.deviceClassName))"},
		{"deniedClasses", "variables.requestClasses.map(cs, cs.filter(c, !(c in variables.granted)))" +
			".filter(cs, size(cs) > 0).map(cs, cs.join(', '))"},
		{"adminRequests", "variables.requests.filter(r, has(r.exactly) && r.exactly.?adminAccess.orValue(false) == true)" +
			".map(r, r.name)"},
	},
	validation: []celValidation{
		{
			expression: "size(variables.deniedClasses) == 0",
			messageExpression: "'tenant ' + variables.tenant + ' is not granted DeviceClass ' + variables.deniedClasses.join(', ') + " +
				celString("; its classes are the DeviceClasses labelled "+naming.ClassTenantLabelPrefix) + " + variables.tenant + '=true'",
			reason: "Forbidden",
		},
		{
			expression: "size(variables.adminRequests) == 0",
			messageExpression: "'tenant ' + variables.tenant + ' may not request adminAccess to devices (request ' + " +
				"variables.adminRequests.join(', ') + ')'",
			reason: "Forbidden",
		},
	},
}

// extendedResourcePolicy denies GPU extended resources in container requests and limits; limits count too because
// an extended resource's request defaults to its limit.
var extendedResourcePolicy = admissionPolicy{
	name:  ExtendedResourcePolicyName,
	rules: []admissionRule{{group: "", version: "v1", resources: []string{"pods"}}},
	variables: []celVariable{
		{"tenant", label("namespaceObject", naming.TenantNamespaceLabel) + ".orValue(namespaceObject.metadata.name)"},
		{"prefixes", celList(gpuExtendedResourcePrefixes)},
		{"offending", "(object.spec.?containers.orValue([]) + object.spec.?initContainers.orValue([]))" +
			".filter(c, [c.?resources.?requests.orValue({}), c.?resources.?limits.orValue({})]" +
			".exists(m, m.exists(k, variables.prefixes.exists(p, k.startsWith(p)))))" +
			".map(c, c.name)"},
	},
	validation: []celValidation{{
		expression: "size(variables.offending) == 0",
		messageExpression: "'tenant ' + variables.tenant + ': containers ' + variables.offending.join(', ') + " +
			celString(" request GPUs as extended resources ("+strings.Join(gpuExtendedResourcePrefixes, "*, ")+
				"*); claim a granted DeviceClass through a ResourceClaim instead"),
		reason: "Forbidden",
	}},
}

func celList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = celString(s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// args declares the policy. failurePolicy Fail: a policy that cannot be evaluated denies rather than admits.
func (p admissionPolicy) args() *admissionv1.ValidatingAdmissionPolicyArgs {
	var rules admissionv1.NamedRuleWithOperationsArray
	for _, r := range p.rules {
		rules = append(rules, admissionv1.NamedRuleWithOperationsArgs{
			ApiGroups:   pulumi.ToStringArray([]string{r.group}),
			ApiVersions: pulumi.ToStringArray([]string{r.version}),
			Operations:  pulumi.ToStringArray([]string{"CREATE", "UPDATE"}),
			Resources:   pulumi.ToStringArray(r.resources),
		})
	}
	var vars admissionv1.VariableArray
	for _, v := range p.variables {
		vars = append(vars, admissionv1.VariableArgs{Name: pulumi.String(v.name), Expression: pulumi.String(v.expression)})
	}
	var validations admissionv1.ValidationArray
	for _, v := range p.validation {
		validations = append(validations, admissionv1.ValidationArgs{
			Expression:        pulumi.String(v.expression),
			MessageExpression: pulumi.String(v.messageExpression),
			Reason:            pulumi.String(v.reason),
		})
	}
	spec := &admissionv1.ValidatingAdmissionPolicySpecArgs{
		FailurePolicy: pulumi.String("Fail"),
		MatchConstraints: &admissionv1.MatchResourcesArgs{
			MatchPolicy:   pulumi.String("Equivalent"),
			ResourceRules: rules,
		},
		MatchConditions: admissionv1.MatchConditionArray{
			admissionv1.MatchConditionArgs{Name: pulumi.String("created-or-spec-changed"), Expression: pulumi.String(specChanged)},
		},
		Variables:   vars,
		Validations: validations,
	}
	if p.params {
		spec.ParamKind = &admissionv1.ParamKindArgs{ApiVersion: pulumi.String("v1"), Kind: pulumi.String("ConfigMap")}
	}
	return &admissionv1.ValidatingAdmissionPolicyArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String(p.name), Labels: managedLabels(nil)},
		Spec:     spec,
	}
}

// managedLabels returns extra plus the managed-by label.
func managedLabels(extra map[string]string) pulumi.StringMap {
	m := pulumi.StringMap{naming.ManagedByLabel: pulumi.String(naming.ManagedBy)}
	for k, v := range extra {
		m[k] = pulumi.String(v)
	}
	return m
}
