package tenancy

import (
	"context"
	"fmt"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/mocktest"
	"slices"
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
// rules select the policies, binding namespace selectors the bindings, paramRefs the grants.
type harness struct {
	policies   []*compiledPolicy
	bindings   []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	params     map[string]*corev1.ConfigMap
	namespaces map[string]*corev1.Namespace
}

func newHarness(t *testing.T, rec *mocktest.Recorder) *harness {
	t.Helper()
	h := &harness{params: map[string]*corev1.ConfigMap{}, namespaces: map[string]*corev1.Namespace{}}
	for _, reg := range rec.ByType(policyType) {
		h.policies = append(h.policies, compile(t, decode[admissionregistrationv1.ValidatingAdmissionPolicy](t, reg)))
	}
	for _, reg := range rec.ByType(bindingType) {
		h.bindings = append(h.bindings, decode[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, reg))
	}
	for _, reg := range rec.ByType(configMapType) {
		cm := decode[corev1.ConfigMap](t, reg)
		h.params[cm.Namespace+"/"+cm.Name] = cm
	}
	for _, reg := range rec.ByType(namespaceType) {
		ns := decode[corev1.Namespace](t, reg)
		// The API server sets this label on every namespace.
		ns.Labels[namespaceNameLabel] = ns.Name
		h.namespaces[ns.Name] = ns
	}
	h.namespaces["default"] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{namespaceNameLabel: "default"}}}
	return h
}

func rulesMatch(p *admissionregistrationv1.ValidatingAdmissionPolicy, gvr schema.GroupVersionResource, operation admissionregistrationv1.OperationType) bool {
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if slices.Contains(r.APIGroups, gvr.Group) && slices.Contains(r.APIVersions, gvr.Version) &&
			slices.Contains(r.Resources, gvr.Resource) && slices.Contains(r.Operations, operation) {
			return true
		}
	}
	return false
}

func bindingMatches(t *testing.T, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, ns *corev1.Namespace) bool {
	if b.Spec.MatchResources == nil || b.Spec.MatchResources.NamespaceSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(b.Spec.MatchResources.NamespaceSelector)
	require.NoError(t, err)
	return sel.Matches(labels.Set(ns.Labels))
}

var noOpinion = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", nil
})

// create returns the denial messages for creating obj in namespace, empty when admitted.
func (h *harness) create(t *testing.T, namespace string, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, obj runtime.Object) []string {
	t.Helper()
	return h.admit(t, namespace, gvk, gvr, obj, nil)
}

// admit returns the denial messages for creating obj, or for updating old to obj when old is not nil.
func (h *harness) admit(t *testing.T, namespace string, gvk schema.GroupVersionKind, gvr schema.GroupVersionResource, obj, old runtime.Object) []string {
	t.Helper()
	ns, ok := h.namespaces[namespace]
	require.True(t, ok, "namespace %s", namespace)
	op, opts := admission.Create, runtime.Object(&metav1.CreateOptions{})
	if old != nil {
		op, opts = admission.Update, &metav1.UpdateOptions{}
	}
	attr := admission.NewAttributesRecord(obj, old, gvk, namespace, "test", gvr, "", op,
		opts, false, &user.DefaultInfo{Name: "system:serviceaccount:" + namespace + ":vc-syncer"})
	va := &admission.VersionedAttributes{Attributes: attr, VersionedKind: gvk, VersionedObject: obj, VersionedOldObject: old}
	req := plugincel.CreateAdmissionRequest(attr, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk))
	nsObj := plugincel.CreateNamespaceObject(ns)

	var denials []string
	for _, cp := range h.policies {
		if !rulesMatch(cp.policy, gvr, admissionregistrationv1.OperationType(op)) {
			continue
		}
		for _, b := range h.bindings {
			if b.Spec.PolicyName != cp.policy.Name || !bindingMatches(t, b, ns) {
				continue
			}
			var params runtime.Object
			if cp.policy.Spec.ParamKind != nil {
				cm, ok := h.params[b.Spec.ParamRef.Namespace+"/"+b.Spec.ParamRef.Name]
				if !ok {
					require.Equal(t, admissionregistrationv1.DenyAction, *b.Spec.ParamRef.ParameterNotFoundAction)
					denials = append(denials, "no params found for binding "+b.Name)
					continue
				}
				params = cm
			}
			denials = append(denials, cp.evaluate(t, va, req, params, nsObj)...)
		}
	}
	return denials
}

// evaluate follows policy/validating/validator.go Validate; an evaluation error would deny under failurePolicy Fail,
// but here it fails the test: it means the policy's CEL is wrong.
func (cp *compiledPolicy) evaluate(t *testing.T, va *admission.VersionedAttributes, req *admissionv1.AdmissionRequest, params runtime.Object, ns *corev1.Namespace) []string {
	t.Helper()
	ctx := context.Background()
	match := cp.matcher.Match(ctx, va, params, noOpinion)
	require.NoError(t, match.Error, "policy %s match conditions", cp.policy.Name)
	if !match.Matches {
		return nil
	}
	results, remaining, err := cp.validations.ForInput(ctx, va, req, plugincel.OptionalVariableBindings{VersionedParams: params, Authorizer: noOpinion}, ns, celconfig.RuntimeCELCostBudget)
	require.NoError(t, err)
	messages, _, err := cp.messages.ForInput(ctx, va, req, plugincel.OptionalVariableBindings{VersionedParams: params}, ns, remaining)
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

func TestAdmissionPoliciesCompileWithTheAPIServerCompiler(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	var names []string
	for _, cp := range h.policies {
		names = append(names, cp.policy.Name)
	}
	assert.ElementsMatch(t, []string{EntitlementPolicyName, ExtendedResourcePolicyName}, names)
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
		{name: "platform namespace is not a tenant's", namespace: "default", spec: claimSpec(exactly("gpu", "gpu.nvidia.com"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var denials []string
			if tt.template {
				obj := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: tt.namespace},
					Spec: resourceapi.ResourceClaimTemplateSpec{Spec: tt.spec}}
				denials = h.create(t, tt.namespace, templateGVK, templateGVR, obj)
			} else {
				obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: tt.namespace}, Spec: tt.spec}
				denials = h.create(t, tt.namespace, claimGVK, claimGVR, obj)
			}
			assertDenied(t, denials, tt.wantDenied)
		})
	}
}

func TestEntitlementPolicyNamesOnlyTheForeignClasses(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: "vcluster-team-a"},
		Spec: claimSpec(firstAvailable("x", "a100", "l4", "gpu.nvidia.com"), exactly("y", "a100-1g.5gb"))}
	denials := h.create(t, "vcluster-team-a", claimGVK, claimGVR, obj)
	require.Len(t, denials, 1)
	assert.Contains(t, denials[0], "not granted DeviceClass l4, gpu.nvidia.com;")
	assert.NotContains(t, denials[0], "a100")
}

func TestEntitlementPolicyDeniesWhenGrantsAreMissing(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, teamA(), teamB()))
	delete(h.params, SystemNamespace+"/"+GrantsConfigMap("team-a"))
	obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: "vcluster-team-a"}, Spec: claimSpec(exactly("gpu", "a100"))}
	assert.Equal(t, []string{"no params found for binding " + naming.EntitlementPolicy("team-a")}, h.create(t, "vcluster-team-a", claimGVK, claimGVR, obj))
}

func TestEntitlementPolicyDeniesEverythingToATenantWithoutGrants(t *testing.T) {
	h := newHarness(t, runPlatform(t, testClasses, TenantArgs{Name: "team-c", CPUQuota: "1", MemoryQuota: "1Gi"}))
	obj := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "test", Namespace: "vcluster-team-c"}, Spec: claimSpec(exactly("gpu", "a100"))}
	assertDenied(t, h.create(t, "vcluster-team-c", claimGVK, claimGVR, obj), []string{"tenant team-c is not granted DeviceClass a100"})
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
		{name: "platform namespace not guarded", namespace: "default",
			pod: pod([]corev1.Container{container("main", nil, map[string]string{"nvidia.com/gpu": "1"})}, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.pod.Namespace = tt.namespace
			denials := h.create(t, tt.namespace, podGVK, podGVR, tt.pod)
			assertDenied(t, denials, tt.wantDenied)
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
	assert.Empty(t, h.admit(t, "vcluster-team-a", claimGVK, claimGVR, updated, old))

	changed := updated.DeepCopy()
	changed.Spec = claimSpec(exactly("gpu", "gpu.nvidia.com"))
	assertDenied(t, h.admit(t, "vcluster-team-a", claimGVK, claimGVR, changed, old), []string{"not granted DeviceClass gpu.nvidia.com"})

	legacy := pod([]corev1.Container{container("main", nil, map[string]string{"nvidia.com/gpu": "1"})}, nil)
	legacy.Namespace = "vcluster-team-a"
	relabelled := legacy.DeepCopy()
	relabelled.Labels = map[string]string{"x": "y"}
	assert.Empty(t, h.admit(t, "vcluster-team-a", podGVK, podGVR, relabelled, legacy))
}
