package tenancy

import (
	"context"
	"fmt"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"k8s.io/utils/ptr"
	"slices"
	"strings"
	"testing"

	celgo "github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
)

// expression is a policy expression as the admission plugin's compiler takes it.
type expression struct {
	name, text string
	returns    []*celgo.Type
}

func (e expression) GetExpression() string      { return e.text }
func (e expression) ReturnTypes() []*celgo.Type { return e.returns }
func (e expression) GetName() string            { return e.name }
func (e expression) String() string             { return e.text }

var (
	variableReturns   = []*celgo.Type{celgo.AnyType, celgo.DynType}
	validationReturns = []*celgo.Type{celgo.BoolType}
	messageReturns    = []*celgo.Type{celgo.StringType}
)

type compiledPolicy struct {
	policy      *admissionregistrationv1.ValidatingAdmissionPolicy
	matcher     matchconditions.Matcher
	validations plugincel.ConditionEvaluator
	messages    plugincel.ConditionEvaluator
}

// compile compiles a policy as kube-apiserver does (k8s.io/apiserver v0.34.4 policy/validating/plugin.go
// compilePolicy): same compiler, composition of variables and optional declarations, but in the stricter
// NewExpressions environment the API server checks a policy against when it is created.
func compile(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) *compiledPolicy {
	t.Helper()
	env, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName,
		environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true))
	require.NoError(t, err)
	c := plugincel.NewCompositedCompilerFromTemplate(env)
	hasParams := p.Spec.ParamKind != nil
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true, StrictCost: true}
	messageOpts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, StrictCost: true}
	for _, v := range p.Spec.Variables {
		res := c.CompileAndStoreVariable(expression{name: v.Name, text: v.Expression, returns: variableReturns}, opts, environment.NewExpressions)
		require.Nil(t, res.Error, "policy %s variable %s: %s", p.Name, v.Name, v.Expression)
	}
	var validations, messages []plugincel.ExpressionAccessor
	for _, v := range p.Spec.Validations {
		validations = append(validations, expression{text: v.Expression, returns: validationReturns})
		messages = append(messages, expression{text: v.MessageExpression, returns: messageReturns})
	}
	cp := &compiledPolicy{
		policy:      p,
		validations: c.CompileCondition(validations, opts, environment.NewExpressions),
		messages:    c.CompileCondition(messages, messageOpts, environment.NewExpressions),
	}
	var conditions []plugincel.ExpressionAccessor
	for i := range p.Spec.MatchConditions {
		conditions = append(conditions, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	filter := c.CompileCondition(conditions, opts, environment.NewExpressions)
	require.Empty(t, filter.CompilationErrors(), "policy %s match conditions", p.Name)
	cp.matcher = matchconditions.NewMatcher(filter, p.Spec.FailurePolicy, "policy", "validate", p.Name)
	require.Empty(t, cp.validations.CompilationErrors(), "policy %s validations", p.Name)
	require.Empty(t, cp.messages.CompilationErrors(), "policy %s message expressions", p.Name)
	return cp
}

// harness plays kube-apiserver's ValidatingAdmissionPolicy dispatcher over the objects the components registered:
// rules select the policies, binding namespace selectors the bindings.
type harness struct {
	policies   []*compiledPolicy
	bindings   []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	namespaces map[string]*corev1.Namespace
}

// Namespaces besides the tenants' that the tests create objects in.
var otherNamespaces = map[string]map[string]string{
	"default":         nil,
	"ml-platform":     nil,                                     // testAdmission's platform namespace
	"vcluster-stray":  nil,                                     // named like a tenant's, without the label
	"vcluster-ghost":  {naming.TenantNamespaceLabel: "ghost"},  // labelled for a tenant that does not exist
	"team-a-scratch":  {naming.TenantNamespaceLabel: "team-a"}, // labelled for a tenant it is not named for
	"vcluster-team-z": {naming.TenantNamespaceLabel: "team-a"}, // named for one tenant, labelled for another
}

func newHarness(t *testing.T, rec *mocktest.Recorder) *harness {
	t.Helper()
	h := &harness{namespaces: map[string]*corev1.Namespace{}}
	for _, reg := range rec.ByType(policyType) {
		h.policies = append(h.policies, compile(t, decode[admissionregistrationv1.ValidatingAdmissionPolicy](t, reg)))
	}
	for _, reg := range rec.ByType(bindingType) {
		h.bindings = append(h.bindings, decode[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, reg))
	}
	for _, reg := range rec.ByType(namespaceType) {
		ns := decode[corev1.Namespace](t, reg)
		h.addNamespace(ns.Name, ns.Labels)
	}
	for name, labels := range otherNamespaces {
		h.addNamespace(name, labels)
	}
	return h
}

func (h *harness) addNamespace(name string, labels map[string]string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	// The API server sets this label on every namespace.
	ns.Labels[namespaceNameLabel] = name
	h.namespaces[name] = ns
}

func rulesMatch(p *admissionregistrationv1.ValidatingAdmissionPolicy, gvr schema.GroupVersionResource, subresource string, operation admissionregistrationv1.OperationType) bool {
	resource := gvr.Resource
	if subresource != "" {
		resource += "/" + subresource
	}
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if slices.Contains(r.APIGroups, gvr.Group) && slices.Contains(r.APIVersions, gvr.Version) &&
			slices.Contains(r.Resources, resource) && slices.Contains(r.Operations, operation) {
			return true
		}
	}
	return false
}

// bindingMatches applies a binding's namespace selector: to the object's namespace, or for a Namespace to the
// namespace itself; other cluster-scoped objects always match (k8s.io/apiserver v0.34.4
// pkg/admission/plugin/webhook/predicates/namespace/matcher.go).
func bindingMatches(t *testing.T, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, ns *corev1.Namespace) bool {
	if b.Spec.MatchResources == nil || b.Spec.MatchResources.NamespaceSelector == nil || ns == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.MatchResources.NamespaceSelector)
	require.NoError(t, err)
	return sel.Matches(labels.Set(ns.Labels))
}

var noOpinion = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", nil
})

// syncer is the identity a tenant's vCluster syncer uses on the host.
func syncer(namespace string) string { return "system:serviceaccount:" + namespace + ":vc-syncer" }

// request is one admission request: obj created in namespace ("" for a cluster-scoped object), or updated from old
// when old is set, by user, on subresource when set.
type request struct {
	namespace   string
	gvk         schema.GroupVersionKind
	gvr         schema.GroupVersionResource
	subresource string
	obj, old    runtime.Object
	user        string
	// deleteOptions makes the request a DELETE of old with these options.
	deleteOptions *metav1.DeleteOptions
}

// create returns the denial messages for creating obj in namespace as the namespace's syncer, empty when admitted.
func (h *harness) create(t *testing.T, namespace string, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, obj runtime.Object) []string {
	t.Helper()
	return h.do(t, request{namespace: namespace, gvk: gvk, gvr: gvr, obj: obj})
}

// admit returns the denial messages for updating old to obj as the namespace's syncer.
func (h *harness) admit(t *testing.T, namespace string, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, obj, old runtime.Object) []string {
	t.Helper()
	return h.do(t, request{namespace: namespace, gvk: gvk, gvr: gvr, obj: obj, old: old})
}

// do returns the denial messages of every policy and binding that applies to r.
func (h *harness) do(t *testing.T, r request) []string {
	t.Helper()
	var ns *corev1.Namespace
	var nsObj *corev1.Namespace
	if r.namespace != "" {
		var ok bool
		ns, ok = h.namespaces[r.namespace]
		require.True(t, ok, "namespace %s", r.namespace)
		nsObj = plugincel.CreateNamespaceObject(ns)
	} else if n, ok := r.obj.(*corev1.Namespace); ok {
		ns = n
	}
	if r.user == "" {
		r.user = syncer(r.namespace)
	}
	op, opts := admission.Create, runtime.Object(&metav1.CreateOptions{})
	switch {
	case r.deleteOptions != nil:
		op, opts = admission.Delete, r.deleteOptions
	case r.old != nil:
		op, opts = admission.Update, &metav1.UpdateOptions{}
	}
	attr := admission.NewAttributesRecord(r.obj, r.old, r.gvk, r.namespace, "test", r.gvr, r.subresource, op,
		opts, false, &user.DefaultInfo{Name: r.user})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: r.gvk, VersionedObject: r.obj, VersionedOldObject: r.old}
	req := plugincel.CreateAdmissionRequest(attr, metav1.GroupVersionResource(r.gvr), metav1.GroupVersionKind(r.gvk))

	var denials []string
	for _, cp := range h.policies {
		if !rulesMatch(cp.policy, r.gvr, r.subresource, admissionregistrationv1.OperationType(op)) {
			continue
		}
		for _, b := range h.bindings {
			if b.Spec.PolicyName == cp.policy.Name && bindingMatches(t, b, ns) {
				denials = append(denials, cp.evaluate(t, va, req, nsObj)...)
			}
		}
	}
	return denials
}

// evaluate follows policy/validating/validator.go Validate; an evaluation error would deny under failurePolicy Fail,
// but here it fails the test: it means the policy's CEL is wrong.
func (cp *compiledPolicy) evaluate(t *testing.T, va *admission.VersionedAttributes, req *admissionv1.AdmissionRequest, ns *corev1.Namespace) []string {
	t.Helper()
	ctx := context.Background()
	match := cp.matcher.Match(ctx, va, nil, noOpinion)
	require.NoError(t, match.Error, "policy %s match conditions", cp.policy.Name)
	if !match.Matches {
		return nil
	}
	results, remaining, err := cp.validations.ForInput(ctx, va, req, plugincel.OptionalVariableBindings{Authorizer: noOpinion}, ns, celconfig.RuntimeCELCostBudget)
	require.NoError(t, err)
	messages, _, err := cp.messages.ForInput(ctx, va, req, plugincel.OptionalVariableBindings{}, ns, remaining)
	require.NoError(t, err)
	var denials []string
	for i, r := range results {
		require.NoError(t, r.Error, "policy %s: %s", cp.policy.Name, r.ExpressionAccessor)
		if r.EvalResult == celtypes.True {
			continue
		}
		require.NoError(t, messages[i].Error, "policy %s message: %s", cp.policy.Name, messages[i].ExpressionAccessor)
		msg, ok := messages[i].EvalResult.Value().(string)
		require.True(t, ok)
		denials = append(denials, msg)
	}
	return denials
}

var (
	claimGVK    = resourceapi.SchemeGroupVersion.WithKind("ResourceClaim")
	claimGVR    = resourceapi.SchemeGroupVersion.WithResource("resourceclaims")
	templateGVK = resourceapi.SchemeGroupVersion.WithKind("ResourceClaimTemplate")
	templateGVR = resourceapi.SchemeGroupVersion.WithResource("resourceclaimtemplates")
	podGVK      = corev1.SchemeGroupVersion.WithKind("Pod")
	podGVR      = corev1.SchemeGroupVersion.WithResource("pods")
)

func exactly(name, class string) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
	}}
}

func adminExactly(name, class string) resourceapi.DeviceRequest {
	r := exactly(name, class)
	admin := true
	r.Exactly.AdminAccess = &admin
	return r
}

func firstAvailable(name string, classes ...string) resourceapi.DeviceRequest {
	r := resourceapi.DeviceRequest{Name: name}
	for i, c := range classes {
		r.FirstAvailable = append(r.FirstAvailable, resourceapi.DeviceSubRequest{
			Name: fmt.Sprintf("option-%d", i), DeviceClassName: c, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		})
	}
	return r
}

func claimSpec(requests ...resourceapi.DeviceRequest) resourceapi.ResourceClaimSpec {
	return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: requests}}
}

// assertDenied checks that a request was admitted (want empty) or denied once with a message containing each of want.
func assertDenied(t *testing.T, denials, want []string) {
	t.Helper()
	if len(want) == 0 {
		assert.Empty(t, denials)
		return
	}
	require.Len(t, denials, 1)
	for _, w := range want {
		assert.Contains(t, denials[0], w)
	}
}

var (
	namespaceGVK = corev1.SchemeGroupVersion.WithKind("Namespace")
	namespaceGVR = corev1.SchemeGroupVersion.WithResource("namespaces")
	configMapGVK = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	configMapGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretGVK    = corev1.SchemeGroupVersion.WithKind("Secret")
	secretGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
)

func TestAdmissionPoliciesCompileWithTheAPIServerCompiler(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	var names []string
	for _, cp := range h.policies {
		names = append(names, cp.policy.Name)
	}
	var want []string
	for _, g := range Guards(AdmissionArgs{}) {
		want = append(want, g.Name)
	}
	assert.ElementsMatch(t, want, names, "one policy of each guard, none per tenant")
}

func TestCompileCatchesABrokenExpression(t *testing.T) {
	// The harness's compiler must refuse bad CEL, or the policy tests prove nothing.
	env, err := plugincel.NewCompositionEnv(plugincel.VariablesTypeName, environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion(), true))
	require.NoError(t, err)
	cond := plugincel.NewCompositedCompilerFromTemplate(env).CompileCondition(
		[]plugincel.ExpressionAccessor{expression{text: "object.spec.devices.requests.all(r, ", returns: validationReturns}},
		plugincel.OptionalVariableDeclarations{StrictCost: true}, environment.NewExpressions)
	assert.NotEmpty(t, cond.CompilationErrors())
}

func TestRenderLeavesNoPlaceholderAndQuotesEveryLiteral(t *testing.T) {
	p := claimNamespacePolicy([]string{`a') || true || ('`})
	for _, v := range p.variables {
		assert.NotContains(t, p.render(v.expression), "$", "variable %s", v.name)
	}
	assert.Equal(t, `['a\') || true || (\'']`, p.render(`$CATALOG_CLASSES`))
	assert.Equal(t, `$UNKNOWN`, p.render(`$UNKNOWN`), "an unknown placeholder stays and fails to compile")
}

// claimOrTemplate is a claim, or a template with the same spec, in namespace.
func claimOrTemplate(t *testing.T, h *harness, namespace string, template bool, spec resourceapi.ResourceClaimSpec) []string {
	t.Helper()
	if template {
		obj := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: namespace},
			Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec}}
		return h.create(t, namespace, templateGVK, templateGVR, obj)
	}
	obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: namespace}, Spec: spec}
	return h.create(t, namespace, claimGVK, claimGVR, obj)
}

func TestEntitlementPolicyOnClaims(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	tests := []struct {
		name      string
		namespace string
		template  bool
		spec      resourceapi.ResourceClaimSpec
		// wantDenied lists substrings of the one expected denial; empty means admitted.
		wantDenied []string
	}{
		{name: "granted class admitted", namespace: "vcluster-team-a", spec: claimSpec(exactly("gpu", "a100"))},
		{name: "shared class admitted for each grantee", namespace: "vcluster-team-b", spec: claimSpec(exactly("gpu", "a100-1g.5gb"))},
		{name: "claim without device requests admitted", namespace: "vcluster-team-a", spec: claimSpec()},
		{name: "foreign class denied", namespace: "vcluster-team-a", spec: claimSpec(exactly("gpu", "l4")),
			wantDenied: []string{"tenant team-a is not granted DeviceClass l4", "tenant.gpu-tenancy.io/team-a=true"}},
		{name: "other tenant's class denied the other way round", namespace: "vcluster-team-b", spec: claimSpec(exactly("gpu", "a100")),
			wantDenied: []string{"tenant team-b is not granted DeviceClass a100"}},
		{name: "driver class gpu.nvidia.com denied", namespace: "vcluster-team-a", spec: claimSpec(exactly("gpu", "gpu.nvidia.com")),
			wantDenied: []string{"tenant team-a is not granted DeviceClass gpu.nvidia.com"}},
		{name: "firstAvailable hiding a foreign class denied", namespace: "vcluster-team-a",
			spec:       claimSpec(firstAvailable("gpu", "a100", "l4")),
			wantDenied: []string{"not granted DeviceClass l4"}},
		{name: "firstAvailable of granted classes admitted", namespace: "vcluster-team-a",
			spec: claimSpec(firstAvailable("gpu", "a100", "a100-1g.5gb"))},
		{name: "foreign class in a second request denied", namespace: "vcluster-team-a",
			spec:       claimSpec(exactly("a", "a100"), exactly("b", "mig.nvidia.com")),
			wantDenied: []string{"not granted DeviceClass mig.nvidia.com"}},
		{name: "template with foreign class denied", namespace: "vcluster-team-a", template: true,
			spec: claimSpec(exactly("gpu", "l4")), wantDenied: []string{"tenant team-a is not granted DeviceClass l4"}},
		{name: "template with firstAvailable foreign class denied", namespace: "vcluster-team-a", template: true,
			spec: claimSpec(firstAvailable("gpu", "a100-1g.5gb", "l4")), wantDenied: []string{"not granted DeviceClass l4"}},
		{name: "template with granted class admitted", namespace: "vcluster-team-a", template: true,
			spec: claimSpec(exactly("gpu", "a100-1g.5gb"))},
		{name: "adminAccess denied even on a granted class", namespace: "vcluster-team-a",
			spec:       claimSpec(adminExactly("debug", "a100")),
			wantDenied: []string{"tenant team-a may not request adminAccess", "request debug"}},
		{name: "adminAccess in a template denied", namespace: "vcluster-team-b", template: true,
			spec:       claimSpec(adminExactly("debug", "l4")),
			wantDenied: []string{"tenant team-b may not request adminAccess"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, claimOrTemplate(t, h, tt.namespace, tt.template, tt.spec), tt.wantDenied)
		})
	}
}

func TestEntitlementPolicyNamesOnlyTheForeignClasses(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	denials := claimOrTemplate(t, h, "vcluster-team-a", false,
		claimSpec(firstAvailable("x", "a100", "l4", "gpu.nvidia.com"), exactly("y", "a100-1g.5gb")))
	require.Len(t, denials, 1)
	assert.Contains(t, denials[0], "not granted DeviceClass l4, gpu.nvidia.com;")
	assert.NotContains(t, denials[0], "a100")
}

func TestEntitlementPolicyDeniesEverythingToATenantWithoutGrants(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, TenantArgs{Name: "team-c", CPUQuota: "1", MemoryQuota: "1Gi"}))
	assertDenied(t, claimOrTemplate(t, h, "vcluster-team-c", false, claimSpec(exactly("gpu", "a100"))),
		[]string{"tenant team-c is not granted DeviceClass a100"})
}

func TestClaimsOfGPUClassesOnlyInTenantNamespaces(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	notATenant := "is not a tenant host namespace"
	tests := []struct {
		name       string
		namespace  string
		template   bool
		spec       resourceapi.ResourceClaimSpec
		wantDenied []string
	}{
		{name: "the driver's class in default", namespace: "default", spec: claimSpec(exactly("gpu", "gpu.nvidia.com")),
			wantDenied: []string{"namespace default " + notATenant, "DeviceClass gpu.nvidia.com"}},
		{name: "a catalog class in default", namespace: "default", spec: claimSpec(exactly("gpu", "a100")),
			wantDenied: []string{notATenant, "DeviceClass a100"}},
		{name: "any class under nvidia.com", namespace: "default", template: true, spec: claimSpec(exactly("gpu", "vfio.gpu.nvidia.com")),
			wantDenied: []string{notATenant}},
		{name: "a GPU class hidden in firstAvailable", namespace: "default", spec: claimSpec(firstAvailable("gpu", "nic.example.com", "mig.nvidia.com")),
			wantDenied: []string{notATenant, "mig.nvidia.com"}},
		{name: "a class of another driver", namespace: "default", spec: claimSpec(exactly("nic", "nic.example.com"))},
		{name: "a tenant-like namespace without the label", namespace: "vcluster-stray", spec: claimSpec(exactly("gpu", "a100")),
			wantDenied: []string{"namespace vcluster-stray " + notATenant}},
		{name: "a namespace labelled for a tenant that does not exist", namespace: "vcluster-ghost", spec: claimSpec(exactly("gpu", "a100")),
			wantDenied: []string{notATenant}},
		{name: "a second namespace labelled for an existing tenant", namespace: "team-a-scratch", spec: claimSpec(exactly("gpu", "a100")),
			wantDenied: []string{notATenant}},
		{name: "a tenant namespace labelled for another tenant", namespace: "vcluster-team-z", spec: claimSpec(exactly("gpu", "a100")),
			wantDenied: []string{notATenant}},
		{name: "a platform namespace", namespace: "ml-platform", spec: claimSpec(exactly("gpu", "gpu.nvidia.com"))},
		{name: "the tenant's own namespace", namespace: "vcluster-team-a", spec: claimSpec(exactly("gpu", "a100"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, claimOrTemplate(t, h, tt.namespace, tt.template, tt.spec), tt.wantDenied)
		})
	}
}

func TestTenantLabelOnlyOnTheTenantsNamespace(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	ns := func(name, tenant string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if tenant != "" {
			n.Labels = map[string]string{naming.TenantNamespaceLabel: tenant}
		}
		return n
	}
	create := func(n *corev1.Namespace) []string {
		return h.do(t, request{gvk: namespaceGVK, gvr: namespaceGVR, obj: n, user: "admin"})
	}
	assert.Empty(t, create(ns("vcluster-team-a", "team-a")), "the tenant's own namespace")
	assert.Empty(t, create(ns("ml-platform", "")), "a namespace without the label")
	assertDenied(t, create(ns("scratch", "team-a")), []string{"namespace scratch may not carry gpu-tenancy.io/tenant=team-a",
		"only that tenant's host namespace vcluster-team-a carries it"})
	assertDenied(t, create(ns("vcluster-team-b", "team-a")), []string{"may not carry gpu-tenancy.io/tenant=team-a"})
	relabelled := h.do(t, request{gvk: namespaceGVK, gvr: namespaceGVR, obj: ns("default", "team-a"), old: ns("default", ""), user: "admin"})
	assertDenied(t, relabelled, []string{"namespace default may not carry"})
}

// claim is an allocated or unallocated claim of class in namespace, reserved for the named pods.
func claim(namespace, class string, allocated bool, reservedFor ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpu", Namespace: namespace}, Spec: claimSpec(exactly("gpu", class))}
	if allocated {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: Driver, Pool: "gpu-a100-whole-0", Device: "gpu-0",
		}}}}
	}
	for _, p := range reservedFor {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p, UID: types.UID(p + "-uid")})
	}
	return c
}

// statusUpdate is an update of a claim's status subresource from old to updated by user.
func statusUpdate(namespace, user string, updated, old *resourceapi.ResourceClaim) request {
	return request{namespace: namespace, gvk: claimGVK, gvr: claimGVR, subresource: "status", obj: updated, old: old, user: user}
}

func TestOnlyTheSchedulerAndClaimControllerAllocate(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	const ns = "vcluster-team-a"
	scheduler, controller := "system:kube-scheduler", "system:serviceaccount:kube-system:resource-claim-controller"
	foreign := claim(ns, "a100", true)
	foreign.Status.Allocation.Devices.Results[0].Pool, foreign.Status.Allocation.Devices.Results[0].Device = "gpu-a100-mig-0", "gpu-0-mig-1g5gb-19-0"
	withDeviceStatus := claim(ns, "a100", true, "trainer")
	withDeviceStatus.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: Driver, Pool: "gpu-a100-whole-0", Device: "gpu-0"}}
	writersOnly := []string{"may change the allocation or reservations of ResourceClaim vcluster-team-a/gpu",
		"system:kube-scheduler", "may not"}
	tests := []struct {
		name       string
		req        request
		wantDenied []string
	}{
		{"the scheduler allocates and reserves", statusUpdate(ns, scheduler, claim(ns, "a100", true, "trainer"), claim(ns, "a100", false)), nil},
		{"the claim controller releases", statusUpdate(ns, controller, claim(ns, "a100", false), claim(ns, "a100", true, "trainer")), nil},
		{"the syncer may not allocate", statusUpdate(ns, syncer(ns), claim(ns, "a100", true), claim(ns, "a100", false)), writersOnly},
		{"the syncer may not swap in another device", statusUpdate(ns, syncer(ns), foreign, claim(ns, "a100", true)), writersOnly},
		{"the syncer may not reserve", statusUpdate(ns, syncer(ns), claim(ns, "a100", true, "thief"), claim(ns, "a100", true)), writersOnly},
		{"the syncer may not release another's reservation", statusUpdate(ns, syncer(ns), claim(ns, "a100", true), claim(ns, "a100", true, "trainer")), writersOnly},
		{"the cluster admin may not allocate either", statusUpdate(ns, "admin", claim(ns, "a100", true), claim(ns, "a100", false)), writersOnly},
		{"the DRA driver reports device status", statusUpdate(ns, "system:serviceaccount:dra-driver-nvidia-gpu:kubelet-plugin",
			withDeviceStatus, claim(ns, "a100", true, "trainer")), nil},
		{"outside tenant namespaces too", statusUpdate("default", syncer("default"), claim("default", "a100", true), claim("default", "a100", false)),
			[]string{"may change the allocation or reservations of ResourceClaim default/gpu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertDenied(t, h.do(t, tt.req), tt.wantDenied) })
	}
}

func TestARevokedClassGetsNoNewAllocationOrReservation(t *testing.T) {
	// team-a held l4 before its grant was revoked: its claim exists, naming l4.
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	const ns, scheduler = "vcluster-team-a", "system:kube-scheduler"
	revoked := []string{"claim gpu of tenant team-a names DeviceClass l4, which is no longer granted", "no pod may start using it"}
	tests := []struct {
		name       string
		req        request
		wantDenied []string
	}{
		{"no allocation", statusUpdate(ns, scheduler, claim(ns, "l4", true, "new-pod"), claim(ns, "l4", false)), revoked},
		{"no new pod on an allocated claim", statusUpdate(ns, scheduler, claim(ns, "l4", true, "old-pod", "new-pod"), claim(ns, "l4", true, "old-pod")), revoked},
		{"release still works", statusUpdate(ns, "system:serviceaccount:kube-system:resource-claim-controller",
			claim(ns, "l4", false), claim(ns, "l4", true, "old-pod")), nil},
		{"granted classes still allocate", statusUpdate(ns, scheduler, claim(ns, "a100", true, "new-pod"), claim(ns, "a100", false)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertDenied(t, h.do(t, tt.req), tt.wantDenied) })
	}
}

func pod(containers, initContainers []corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "test"}, Spec: corev1.PodSpec{Containers: containers, InitContainers: initContainers}}
}

func container(name string, requests, limits map[string]string) corev1.Container {
	list := func(m map[string]string) corev1.ResourceList {
		if m == nil {
			return nil
		}
		l := corev1.ResourceList{}
		for k, v := range m {
			l[corev1.ResourceName(k)] = apiresource.MustParse(v)
		}
		return l
	}
	return corev1.Container{Name: name, Image: "busybox", Resources: corev1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}}
}

func withEnv(c corev1.Container, env ...corev1.EnvVar) corev1.Container {
	c.Env = append(c.Env, env...)
	return c
}

func withEnvFrom(c corev1.Container, prefix string) corev1.Container {
	c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{Prefix: prefix,
		ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}})
	return c
}

func TestNoNVIDIARuntimeVariablesInTenantContainers(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	plain := container("main", nil, nil)
	visible := corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}
	fromConfigMap := corev1.EnvVar{Name: "NVIDIA_DRIVER_CAPABILITIES", ValueFrom: &corev1.EnvVarSource{
		ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "caps"}}}
	byName := "set NVIDIA runtime variables"
	tests := []struct {
		name       string
		namespace  string
		pod        *corev1.Pod
		wantDenied []string
	}{
		{"a plain pod", "vcluster-team-a", pod([]corev1.Container{plain}, nil), nil},
		{"other variables", "vcluster-team-a", pod([]corev1.Container{withEnv(plain, corev1.EnvVar{Name: "CUDA_VISIBLE_DEVICES", Value: "0"})}, nil), nil},
		{"NVIDIA_VISIBLE_DEVICES in a container", "vcluster-team-a", pod([]corev1.Container{withEnv(plain, visible)}, nil),
			[]string{"tenant team-a: containers main " + byName, "NVIDIA_VISIBLE_DEVICES"}},
		{"in an init container", "vcluster-team-a", pod([]corev1.Container{plain},
			[]corev1.Container{withEnv(container("init", nil, nil), corev1.EnvVar{Name: "NVIDIA_MIG_CONFIG_DEVICES", Value: "all"})}),
			[]string{"containers init " + byName}},
		{"a value taken from a ConfigMap", "vcluster-team-a", pod([]corev1.Container{withEnv(plain, fromConfigMap)}, nil), []string{byName}},
		{"envFrom with the prefix NVIDIA_", "vcluster-team-a", pod([]corev1.Container{withEnvFrom(plain, "NVIDIA_")}, nil),
			[]string{"containers main take envFrom with a prefix that can spell"}},
		{"envFrom with a one-letter prefix", "vcluster-team-a", pod([]corev1.Container{withEnvFrom(plain, "N")}, nil),
			[]string{"take envFrom with a prefix"}},
		{"envFrom with another prefix", "vcluster-team-a", pod([]corev1.Container{withEnvFrom(plain, "APP_")}, nil), nil},
		{"envFrom without a prefix (its keys are checked where they live)", "vcluster-team-a", pod([]corev1.Container{withEnvFrom(plain, "")}, nil), nil},
		{"a platform namespace is not guarded", "ml-platform", pod([]corev1.Container{withEnv(plain, visible)}, nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.pod.Namespace = tt.namespace
			assertDenied(t, h.create(t, tt.namespace, podGVK, podGVR, tt.pod), tt.wantDenied)
		})
	}

	t.Run("an ephemeral container added to a running pod", func(t *testing.T) {
		old := pod([]corev1.Container{plain}, nil)
		old.Namespace = "vcluster-team-a"
		debug := old.DeepCopy()
		debug.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "busybox", Env: []corev1.EnvVar{visible}}}}
		denials := h.do(t, request{namespace: "vcluster-team-a", gvk: podGVK, gvr: podGVR, subresource: "ephemeralcontainers", obj: debug, old: old})
		assertDenied(t, denials, []string{"containers debug " + byName})
	})
}

func TestNoNVIDIARuntimeVariableKeysInTenantConfigMapsAndSecrets(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	cm := func(ns string, keys ...string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{}}
		for _, k := range keys {
			c.Data[k] = "all"
		}
		return c
	}
	assert.Empty(t, h.create(t, "vcluster-team-a", configMapGVK, configMapGVR, cm("vcluster-team-a", "LOG_LEVEL")))
	assertDenied(t, h.create(t, "vcluster-team-a", configMapGVK, configMapGVR, cm("vcluster-team-a", "LOG_LEVEL", "NVIDIA_VISIBLE_DEVICES")),
		[]string{"tenant team-a: ConfigMap settings has keys NVIDIA_VISIBLE_DEVICES", "envFrom"})
	assertDenied(t, h.admit(t, "vcluster-team-a", configMapGVK, configMapGVR, cm("vcluster-team-a", "NVIDIA_DRIVER_CAPABILITIES"), cm("vcluster-team-a")),
		[]string{"has keys NVIDIA_DRIVER_CAPABILITIES"})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "vcluster-team-a"},
		Data: map[string][]byte{"NVIDIA_MIG_MONITOR_DEVICES": []byte("all")}}
	assertDenied(t, h.create(t, "vcluster-team-a", secretGVK, secretGVR, secret), []string{"Secret creds has keys NVIDIA_MIG_MONITOR_DEVICES"})
	assert.Empty(t, h.create(t, "default", configMapGVK, configMapGVR, cm("default", "NVIDIA_VISIBLE_DEVICES")), "outside tenant namespaces")
}

func TestExtendedResourcePolicyOnPods(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	withClaim := container("main", nil, nil)
	withClaim.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	tests := []struct {
		name       string
		namespace  string
		pod        *corev1.Pod
		wantDenied []string
	}{
		{name: "cpu and memory admitted", namespace: "vcluster-team-a",
			pod: pod([]corev1.Container{container("main", map[string]string{"cpu": "1"}, map[string]string{"memory": "1Gi"})}, nil)},
		{name: "pod using a claim admitted", namespace: "vcluster-team-a", pod: pod([]corev1.Container{withClaim}, nil)},
		{name: "pod without resources admitted", namespace: "vcluster-team-a", pod: pod([]corev1.Container{container("main", nil, nil)}, nil)},
		{name: "nvidia.com/gpu limit denied", namespace: "vcluster-team-a",
			pod:        pod([]corev1.Container{container("ok", nil, nil), container("trainer", nil, map[string]string{"nvidia.com/gpu": "1"})}, nil),
			wantDenied: []string{"tenant team-a: containers trainer request GPUs as extended resources"}},
		{name: "device plugin MIG resource denied", namespace: "vcluster-team-a",
			pod:        pod([]corev1.Container{container("mig", map[string]string{"nvidia.com/mig-1g.5gb": "1"}, map[string]string{"nvidia.com/mig-1g.5gb": "1"})}, nil),
			wantDenied: []string{"containers mig request"}},
		{name: "implicit DeviceClass extended resource in an init container denied", namespace: "vcluster-team-a",
			pod: pod([]corev1.Container{container("main", nil, nil)},
				[]corev1.Container{container("warmup", map[string]string{"deviceclass.resource.kubernetes.io/a100": "1"}, nil)}),
			wantDenied: []string{"containers warmup request", "deviceclass.resource.kubernetes.io/*"}},
		{name: "platform namespace not guarded", namespace: "ml-platform",
			pod: pod([]corev1.Container{container("main", nil, map[string]string{"nvidia.com/gpu": "1"})}, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.pod.Namespace = tt.namespace
			assertDenied(t, h.create(t, tt.namespace, podGVK, podGVR, tt.pod), tt.wantDenied)
		})
	}
}

// With a100 and l4 asked for by name, each tenant's pods may ask for the names of its own granted classes only,
// whoever writes the pod; every other name that reaches a GPU stays refused.
func TestExtendedResourceNamesOfGrantedClassesOnly(t *testing.T) {
	h := newHarness(t, runPlatformNamed(t, []string{"a100", "l4"}, testClasses, teamA(), teamB()))
	asking := func(resource string) *corev1.Pod {
		return pod([]corev1.Container{container("main", nil, map[string]string{resource: "1"})}, nil)
	}
	scheduler := "system:kube-scheduler"
	tests := []struct {
		name, namespace, user string
		pod                   *corev1.Pod
		wantDenied            []string
	}{
		{name: "its own class's name admitted", namespace: "vcluster-team-a", pod: asking("gpu-tenancy.io/a100")},
		{name: "its own class's name in requests and limits admitted", namespace: "vcluster-team-b",
			pod: pod([]corev1.Container{container("main", map[string]string{"gpu-tenancy.io/l4": "2"}, map[string]string{"gpu-tenancy.io/l4": "2"})}, nil)},
		{name: "another tenant's class's name denied", namespace: "vcluster-team-a", pod: asking("gpu-tenancy.io/l4"),
			wantDenied: []string{"tenant team-a is not granted gpu-tenancy.io/l4 (DeviceClass l4)", "tenant.gpu-tenancy.io/team-a=true"}},
		{name: "another tenant's class's name in an init container denied", namespace: "vcluster-team-b",
			pod:        pod([]corev1.Container{container("main", nil, nil)}, []corev1.Container{container("warmup", map[string]string{"gpu-tenancy.io/a100": "1"}, nil)}),
			wantDenied: []string{"tenant team-b is not granted gpu-tenancy.io/a100 (DeviceClass a100)"}},
		{name: "another tenant's class's name denied whoever writes the pod", namespace: "vcluster-team-a", user: scheduler,
			pod: asking("gpu-tenancy.io/l4"), wantDenied: []string{"not granted gpu-tenancy.io/l4"}},
		{name: "the implicit name of its own class denied", namespace: "vcluster-team-a",
			pod: asking("deviceclass.resource.kubernetes.io/a100"), wantDenied: []string{"containers main request GPUs as extended resources"}},
		{name: "the device plugin's name denied", namespace: "vcluster-team-a", pod: asking("nvidia.com/gpu"),
			wantDenied: []string{"containers main request GPUs as extended resources"}},
		{name: "the name of a class granted but asked for only by claims is no device's name", namespace: "vcluster-team-a",
			pod: asking("gpu-tenancy.io/a100-1g.5gb")},
		{name: "a platform namespace may ask for any", namespace: "ml-platform", pod: asking("gpu-tenancy.io/l4")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.pod.Namespace = tt.namespace
			assertDenied(t, h.do(t, request{namespace: tt.namespace, gvk: podGVK, gvr: podGVR, obj: tt.pod, user: tt.user}), tt.wantDenied)
		})
	}
}

// The quota charges a claim the scheduler made for a pod's extended resources only what its pod does not pay, so no
// one but the scheduler (and the other claim-status writers) may mark a claim so.
func TestOnlyTheSchedulerMarksExtendedResourceClaims(t *testing.T) {
	h := newHarness(t, runPlatformNamed(t, []string{"a100"}, testClasses, teamA()))
	const ns = "vcluster-team-a"
	marked := func(value string) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "trainer-extended-resources-x7k2p", Namespace: ns},
			Spec: claimSpec(exactly("container-0-request-0", "a100"))}
		if value != "" {
			c.Annotations = map[string]string{ExtendedResourceClaimAnnotation: value}
		}
		return c
	}
	claimReq := func(obj, old *resourceapi.ResourceClaim, user string) request {
		r := request{namespace: ns, gvk: claimGVK, gvr: claimGVR, obj: obj, user: user}
		if old != nil {
			r.old = old
		}
		return r
	}
	const scheduler = "system:kube-scheduler"
	tests := []struct {
		name       string
		req        request
		wantDenied []string
	}{
		{"the scheduler's claim for a pod admitted", claimReq(marked("true"), nil, scheduler), nil},
		{"a tenant's own claim admitted", claimReq(marked(""), nil, syncer(ns)), nil},
		{"a claim the tenant marks denied", claimReq(marked("true"), nil, syncer(ns)),
			[]string{"only system:kube-scheduler", "may set or change resource.kubernetes.io/extended-resource-claim", syncer(ns) + " may not"}},
		{"a mark the tenant adds later denied", claimReq(marked("true"), marked(""), syncer(ns)), []string{"may set or change"}},
		{"a mark the tenant removes denied", claimReq(marked(""), marked("true"), syncer(ns)), []string{"may set or change"}},
		{"a mark the tenant changes denied", claimReq(marked("false"), marked("true"), syncer(ns)), []string{"may set or change"}},
		{"the tenant's other changes to a marked claim admitted", claimReq(func() *resourceapi.ResourceClaim {
			c := marked("true")
			c.Labels = map[string]string{"app": "trainer"}
			return c
		}(), marked("true"), syncer(ns)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assertDenied(t, h.do(t, tt.req), tt.wantDenied) })
	}
}

// The scheduler maps a name to one class cluster-wide, the newer class winning: no DeviceClass may take a catalog
// class's name, nor open a name of its own, whoever writes it.
func TestDeviceClassesMapOnlyTheCatalogsNames(t *testing.T) {
	h := newHarness(t, runPlatformNamed(t, []string{"a100"}, testClasses, teamA()))
	class := func(name, resource string) *resourceapi.DeviceClass {
		dc := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if resource != "" {
			dc.Spec.ExtendedResourceName = ptr.To(resource)
		}
		return dc
	}
	gvk, gvr := resourceapi.SchemeGroupVersion.WithKind("DeviceClass"), resourceapi.SchemeGroupVersion.WithResource("deviceclasses")
	const admin = "kubernetes-admin"
	tests := []struct {
		name       string
		obj, old   *resourceapi.DeviceClass
		wantDenied []string
	}{
		{"the catalog's class with its own name admitted", class("a100", "gpu-tenancy.io/a100"), nil, nil},
		{"a class with no name admitted", class("nics", ""), nil, nil},
		{"the NVIDIA driver's class admitted", class("gpu.nvidia.com", "nvidia.com/gpu"), nil, nil},
		{"another class taking the catalog's name denied", class("a100-any", "gpu-tenancy.io/a100"), nil,
			[]string{"DeviceClass a100-any may not map gpu-tenancy.io/a100, the extended-resource name of the catalog's class a100"}},
		{"a class with a name of its own denied", class("sneaky", "example.com/gpu"), nil,
			[]string{"DeviceClass sneaky may not map example.com/gpu", "gpu-tenancy.io/a100", "gpu-tenancy.io/a100-1g.5gb", "gpu-tenancy.io/l4"}},
		{"a catalog class given another name denied", class("a100", "example.com/a100"), class("a100", "gpu-tenancy.io/a100"),
			[]string{"may not map example.com/a100"}},
		// The guard's list is every catalog class's name, asked for or not: it changes with the catalog only, so a class
		// that takes its name in the up where a tenant starts asking for it never meets the guard's previous list.
		{"a catalog class with its own name, asked for by name or not, admitted", class("l4", "gpu-tenancy.io/l4"), nil, nil},
		{"a catalog class given its own name where it had none admitted", class("l4", "gpu-tenancy.io/l4"), class("l4", ""), nil},
		{"a catalog class taking another catalog class's name denied", class("l4", "gpu-tenancy.io/a100"), class("l4", ""),
			[]string{"may not map gpu-tenancy.io/a100, the extended-resource name of the catalog's class a100"}},
		{"a class keeping a name the catalog no longer carries is updated (its finalizers, as it is deleted)", func() *resourceapi.DeviceClass {
			c := class("l4", "gpu-tenancy.io/l4")
			c.Finalizers = nil
			return c
		}(), func() *resourceapi.DeviceClass {
			c := class("l4", "gpu-tenancy.io/l4")
			c.Finalizers = []string{"foregroundDeletion"}
			return c
		}(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := request{gvk: gvk, gvr: gvr, obj: tt.obj, user: admin}
			if tt.old != nil {
				r.old = tt.old
			}
			assertDenied(t, h.do(t, r), tt.wantDenied)
		})
	}
}

func TestPoliciesCheckUpdatesOnlyWhenTheSpecChanges(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	// A claim admitted before team-a lost l4: the resourceclaim controller must still be able to drop its finalizer.
	old := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: "vcluster-team-a", Finalizers: []string{"resource.kubernetes.io/delete-protection"}},
		Spec: claimSpec(exactly("gpu", "l4"))}
	updated := old.DeepCopy()
	updated.Finalizers = nil
	controller := "system:serviceaccount:kube-system:resource-claim-controller"
	assert.Empty(t, h.do(t, request{namespace: "vcluster-team-a", gvk: claimGVK, gvr: claimGVR, obj: updated, old: old, user: controller}))

	changed := old.DeepCopy()
	changed.Spec = claimSpec(exactly("gpu", "gpu.nvidia.com"))
	assertDenied(t, h.admit(t, "vcluster-team-a", claimGVK, claimGVR, changed, old), []string{"not granted DeviceClass gpu.nvidia.com"})

	legacy := pod([]corev1.Container{withEnv(container("main", nil, map[string]string{"nvidia.com/gpu": "1"}), corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"})}, nil)
	legacy.Namespace = "vcluster-team-a"
	relabelled := legacy.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	assert.Empty(t, h.admit(t, "vcluster-team-a", podGVK, podGVR, relabelled, legacy), "a pod admitted before the policies keeps working")
}

// One claim may not cost the scheduler far more than the devices it gets, nor carry the driver's configuration; what a
// GPU job asks for (a few requests, a few alternatives, a selector) stays admitted.
func TestClaimShapeIsBounded(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA()))
	selected := func(r resourceapi.DeviceRequest, n, length int) resourceapi.DeviceRequest {
		for i := range n {
			expr := fmt.Sprintf("device.attributes['gpu.nvidia.com'].index == %d", i)
			expr += strings.Repeat(" ", max(0, length-len(expr)))
			r.Exactly.Selectors = append(r.Exactly.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: expr}})
		}
		return r
	}
	requests := func(n int) []resourceapi.DeviceRequest {
		var out []resourceapi.DeviceRequest
		for i := range n {
			out = append(out, exactly(fmt.Sprintf("r%d", i), "a100"))
		}
		return out
	}
	alternatives := make([]string, MaxClaimSubRequests+1)
	for i := range alternatives {
		alternatives[i] = "a100"
	}
	all := exactly("gpu", "a100")
	all.Exactly.AllocationMode, all.Exactly.Count = resourceapi.DeviceAllocationModeAll, 0
	firstAll := firstAvailable("gpu", "a100", "a100-1g.5gb")
	firstAll.FirstAvailable[1].AllocationMode, firstAll.FirstAvailable[1].Count = resourceapi.DeviceAllocationModeAll, 0
	configured := claimSpec(exactly("gpu", "a100"))
	configured.Devices.Config = []resourceapi.DeviceClaimConfiguration{{Requests: []string{"gpu"}, DeviceConfiguration: resourceapi.DeviceConfiguration{
		Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "gpu.nvidia.com", Parameters: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`)}}}}}
	constrained := claimSpec(requests(2)...)
	for i := range MaxClaimConstraints + 1 {
		constrained.Devices.Constraints = append(constrained.Devices.Constraints, resourceapi.DeviceConstraint{
			MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(fmt.Sprintf("gpu.nvidia.com/attr%d", i)))})
	}
	for _, tt := range []struct {
		name       string
		template   bool
		spec       resourceapi.ResourceClaimSpec
		wantDenied []string
	}{
		{name: "a job's claim: a few requests, alternatives and a selector",
			spec: claimSpec(exactly("a", "a100"), firstAvailable("b", "a100", "a100-1g.5gb"), selected(exactly("c", "a100"), 2, 200))},
		{name: "the most requests", spec: claimSpec(requests(MaxClaimRequests)...)},
		{name: "too many requests", spec: claimSpec(requests(MaxClaimRequests + 1)...), wantDenied: []string{"has 9 device requests; a tenant claim may have at most 8"}},
		{name: "too many requests in a template", template: true, spec: claimSpec(requests(MaxClaimRequests + 1)...),
			wantDenied: []string{"has 9 device requests"}},
		{name: "too many alternatives", spec: claimSpec(firstAvailable("gpu", alternatives...)), wantDenied: []string{"more than 8 firstAvailable alternatives"}},
		{name: "too many selectors", spec: claimSpec(selected(exactly("gpu", "a100"), MaxClaimSelectors+1, 10)),
			wantDenied: []string{"more than 4 selectors or a selector longer than 1024 characters"}},
		{name: "a selector too long", spec: claimSpec(selected(exactly("gpu", "a100"), 1, MaxClaimSelectorLength+1)),
			wantDenied: []string{"a selector longer than 1024"}},
		{name: "every matching device", spec: claimSpec(all), wantDenied: []string{"asks for allocationMode All"}},
		{name: "every matching device as an alternative", spec: claimSpec(firstAll), wantDenied: []string{"asks for allocationMode All"}},
		{name: "too many constraints", spec: constrained, wantDenied: []string{"has more than 4 constraints"}},
		{name: "the driver's configuration", spec: configured, wantDenied: []string{"carries device configuration (spec.devices.config)"}},
		{name: "the driver's configuration in a template", template: true, spec: configured, wantDenied: []string{"carries device configuration"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assertDenied(t, claimOrTemplate(t, h, "vcluster-team-a", tt.template, tt.spec), tt.wantDenied)
		})
	}
	t.Run("outside tenant namespaces the platform's own claims are its own", func(t *testing.T) {
		assert.Empty(t, claimOrTemplate(t, h, "ml-platform", false, claimSpec(all)))
	})
}
