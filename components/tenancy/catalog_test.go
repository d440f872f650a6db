package tenancy

import (
	"encoding/json"
	"k8s.io/utils/ptr"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap"
)

const (
	catalogType     = "gpu-tenancy:tenancy:Catalog"
	tenantType      = "gpu-tenancy:tenancy:Tenant"
	deviceClassType = "kubernetes:resource.k8s.io/v1:DeviceClass"
	policyType      = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
	bindingType     = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
	namespaceType   = "kubernetes:core/v1:Namespace"
	configMapType   = "kubernetes:core/v1:ConfigMap"
	quotaType       = "kubernetes:core/v1:ResourceQuota"
	limitRangeType  = "kubernetes:core/v1:LimitRange"
	netpolType      = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
	flowSchemaType  = "kubernetes:flowcontrol.apiserver.k8s.io/v1:FlowSchema"
	levelType       = "kubernetes:flowcontrol.apiserver.k8s.io/v1:PriorityLevelConfiguration"
	ciliumType      = "kubernetes:cilium.io/v2:CiliumNetworkPolicy"
)

// The catalog most tests use: a class per tenant and one shared MIG class (teamA and teamB hold the grants).
var testClasses = []GPUClass{
	{Name: "a100", Device: WholeGPU, Product: "A100"},
	{Name: "a100-1g.5gb", Device: MIG, MIGProfile: "1g.5gb", Product: "A100"},
	{Name: "l4", Device: WholeGPU, Product: "L4"},
}

// testAdmission is what the Platform hands the catalog on a cluster with standard identities and one platform
// namespace.
var testAdmission = AdmissionArgs{PlatformNamespaces: []string{"ml-platform"}, ClaimStatusWriters: cluster.StandardClaimStatusWriters,
	GPUTaints: []string{cluster.GPUTaint.Key}}

// runPlatform runs NewCatalog with the tenants' grants and then NewTenant for each tenant, as the Platform does.
func runPlatform(t *testing.T, classes []GPUClass, tenants ...TenantArgs) *mocktest.Recorder {
	t.Helper()
	return runPlatformWith(t, testAdmission, classes, tenants...)
}

// runPlatformWith is runPlatform with other admission settings.
func runPlatformWith(t *testing.T, admission AdmissionArgs, classes []GPUClass, tenants ...TenantArgs) *mocktest.Recorder {
	t.Helper()
	rec, err := tryPlatformWith(admission, classes, tenants...)
	require.NoError(t, err)
	return rec
}

func tryPlatform(classes []GPUClass, tenants ...TenantArgs) (*mocktest.Recorder, error) {
	return tryPlatformWith(testAdmission, classes, tenants...)
}

func tryPlatformWith(admission AdmissionArgs, classes []GPUClass, tenants ...TenantArgs) (*mocktest.Recorder, error) {
	return tryPlatformNamed(admission, nil, classes, tenants...)
}

// runPlatformNamed is runPlatform with the classes named whose DeviceClasses carry their extended-resource names, and
// each tenant's quota capping the names of its granted ones, as the Platform hands them down.
func runPlatformNamed(t *testing.T, named []string, classes []GPUClass, tenants ...TenantArgs) *mocktest.Recorder {
	t.Helper()
	rec, err := tryPlatformNamed(testAdmission, named, classes, tenants...)
	require.NoError(t, err)
	return rec
}

func tryPlatformNamed(admission AdmissionArgs, named []string, classes []GPUClass, tenants ...TenantArgs) (*mocktest.Recorder, error) {
	rec := &mocktest.Recorder{}
	grants := map[string][]string{}
	for _, t := range tenants {
		grants[t.Name] = t.Classes
	}
	// A class the test grants to no tenant is the platform's.
	classes = slices.Clone(classes)
	for i, c := range classes {
		classes[i].PlatformOnly = len(tenantsOf(grants, c.Name)) == 0
	}
	err := mocktest.Run("test", func(ctx *pulumi.Context) error {
		catalog, err := NewCatalog(ctx, "gpus", &CatalogArgs{Classes: classes, Grants: grants, Admission: admission,
			ExtendedResourceClasses: named})
		if err != nil {
			return err
		}
		for _, args := range tenants {
			args.Catalog = catalog
			for _, c := range classes {
				if slices.Contains(named, c.Name) && slices.Contains(args.Classes, c.Name) {
					if args.ExtendedResourceNames == nil {
						args.ExtendedResourceNames = map[string]string{}
					}
					args.ExtendedResourceNames[c.Name] = c.ResourceName()
				}
			}
			if _, err := NewTenant(ctx, args.Name, &args); err != nil {
				return err
			}
		}
		return nil
	}, rec)
	return rec, err
}

func get(t *testing.T, rec *mocktest.Recorder, typ, name string) mocktest.Registration {
	t.Helper()
	reg, err := rec.Get(typ, name)
	require.NoError(t, err)
	return reg
}

// decode turns registered inputs into the Kubernetes API type the API server would receive.
func decode[T any](t *testing.T, reg mocktest.Registration) *T {
	t.Helper()
	raw, err := json.Marshal(reg.Inputs.Mappable())
	require.NoError(t, err)
	var out T
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	// A field the API type does not know would be pruned or refused by the API server: fail instead.
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&out), "%s %s", reg.Type, reg.Name)
	return &out
}

// child decodes a registration after checking that it is a child of parentType.
func child[T any](t *testing.T, rec *mocktest.Recorder, typ, name, parentType string) *T {
	t.Helper()
	reg := get(t, rec, typ, name)
	childOf(t, reg, parentType)
	return decode[T](t, reg)
}

func childOf(t *testing.T, reg mocktest.Registration, parentType string) {
	t.Helper()
	assert.Equal(t, parentType, string(resource.URN(reg.Parent).Type()), "%s %s must be a child of %s", reg.Type, reg.Name, parentType)
}

func TestCatalogDeviceClasses(t *testing.T) {
	rec := runPlatform(t, testClasses, teamA(), teamB())
	require.Len(t, rec.ByType(deviceClassType), len(testClasses))
	granted := map[string][]string{"a100": {"team-a"}, "a100-1g.5gb": {"team-a", "team-b"}, "l4": {"team-b"}}
	t.Run("a class granted to no tenant is platform-only", func(t *testing.T) {
		dc := decode[resourceapi.DeviceClass](t, get(t, runPlatform(t, testClasses, teamA()), deviceClassType, "gpus-l4"))
		assert.Equal(t, map[string]string{naming.ManagedByLabel: naming.ManagedBy, naming.PlatformOnlyLabel: "true"}, dc.Labels)
	})
	for _, class := range testClasses {
		t.Run(class.Name, func(t *testing.T) {
			dc := child[resourceapi.DeviceClass](t, rec, deviceClassType, "gpus-"+class.Name, catalogType)
			assert.Equal(t, class.Name, dc.Name)
			require.Len(t, dc.Spec.Selectors, 1)
			require.NotNil(t, dc.Spec.Selectors[0].CEL)
			assert.Equal(t, class.CEL(), dc.Spec.Selectors[0].CEL.Expression)
			assert.Nil(t, dc.Spec.ExtendedResourceName, "a tenant class must not open the extended-resource path")

			want := map[string]string{naming.ManagedByLabel: naming.ManagedBy}
			for _, tenant := range granted[class.Name] {
				want[naming.ClassTenantLabel(tenant)] = "true"
			}
			assert.Equal(t, want, dc.Labels)
		})
	}
}

func TestCatalogNamesOnlyTheClassesAskedForByName(t *testing.T) {
	classes := slices.Clone(testClasses)
	classes[2].ExtendedResourceName = "gpus.example.com/l4"
	rec := runPlatformNamed(t, []string{"a100", "l4"}, classes, teamA(), teamB())
	for class, want := range map[string]string{"a100": "gpu-tenancy.io/a100", "a100-1g.5gb": "", "l4": "gpus.example.com/l4"} {
		t.Run(class, func(t *testing.T) {
			reg := get(t, rec, deviceClassType, "gpus-"+class)
			dc := decode[resourceapi.DeviceClass](t, reg)
			assert.Equal(t, want, ptr.Deref(dc.Spec.ExtendedResourceName, ""))
			assert.Contains(t, reg.Dependencies, "urn:pulumi:test::gpu-tenancy::gpu-tenancy:tenancy:Catalog$kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding::gpus-extended-resource-classes",
				"created once the guard that checks class names knows its name")
		})
	}
	_, err := tryPlatformNamed(testAdmission, []string{"h100"}, testClasses, teamA())
	assert.ErrorContains(t, err, `catalog.extendedResourceClasses[0]: Unsupported value: "h100"`)
}

func TestCatalogGuards(t *testing.T) {
	rec := runPlatform(t, testClasses, teamA(), teamB())
	tests := []struct {
		resource, policy string
		resources        []string
		// selector is how the binding picks namespaces: "" for all of them.
		selector string
	}{
		{"gpus-claim-namespaces", ClaimNamespacePolicy, []string{"resourceclaims", "resourceclaimtemplates"}, "kubernetes.io/metadata.name notin (ml-platform)"},
		{"gpus-namespace-label", NamespaceLabelPolicy, []string{"namespaces"}, ""},
		{"gpus-claim-status", ClaimStatusPolicy, []string{"resourceclaims/status"}, ""},
		{"gpus-runtime-env", RuntimeEnvPolicy, []string{"pods", "pods/ephemeralcontainers"}, naming.TenantNamespaceLabel},
		{"gpus-runtime-env-keys", RuntimeEnvKeysPolicy, []string{"configmaps", "secrets"}, naming.TenantNamespaceLabel},
		{"gpus-extended-resources", ExtendedResourcePolicy, []string{"pods"}, naming.TenantNamespaceLabel},
		{"gpus-extended-resource-claims", ExtendedResourceClaimPolicy, []string{"resourceclaims"}, naming.TenantNamespaceLabel},
		{"gpus-extended-resource-classes", ExtendedResourceClassPolicy, []string{"deviceclasses"}, ""},
		{"gpus-node-device-paths", NodeDevicePolicy, []string{"pods", "pods/ephemeralcontainers", "pods/status"}, naming.TenantNamespaceLabel},
		{"gpus-pod-placement", PodPlacementPolicy, []string{"pods"}, naming.TenantNamespaceLabel},
		{"gpus-pod-phase", PodPhasePolicy, []string{"pods/status"}, naming.TenantNamespaceLabel},
		{"gpus-pod-graceful-delete", GracefulDeletePolicy, []string{"pods", "pods"}, naming.TenantNamespaceLabel},
		{"gpus-claim-delete-protection", ClaimDeleteProtectionPolicy, []string{"resourceclaims"}, naming.TenantNamespaceLabel},
		{"gpus-service-external-ips", ServicePolicy, []string{"services"}, naming.TenantNamespaceLabel},
		{"gpus-volume-claims", VolumeClaimPolicy, []string{"persistentvolumeclaims"}, naming.TenantNamespaceLabel},
		{"gpus-pod-volume-types", PodVolumeTypesPolicy, []string{"pods"}, naming.TenantNamespaceLabel},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			p := child[admissionregistrationv1.ValidatingAdmissionPolicy](t, rec, policyType, tt.resource, catalogType)
			assert.Equal(t, tt.policy, p.Name)
			require.NotNil(t, p.Spec.FailurePolicy)
			assert.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy, "a policy that cannot be evaluated denies")
			assert.Nil(t, p.Spec.ParamKind, "no params: what a policy needs is compiled into it")
			require.NotNil(t, p.Spec.MatchConstraints.MatchPolicy)
			assert.Equal(t, admissionregistrationv1.Equivalent, *p.Spec.MatchConstraints.MatchPolicy, "every API version is checked")
			var resources []string
			for _, r := range p.Spec.MatchConstraints.ResourceRules {
				resources = append(resources, r.Resources...)
			}
			assert.ElementsMatch(t, tt.resources, resources)
			for _, v := range p.Spec.Validations {
				assert.NotEmpty(t, v.MessageExpression, "validation %q must explain itself", v.Expression)
			}

			b := child[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, rec, bindingType, tt.resource, catalogType)
			assert.Equal(t, tt.policy, b.Spec.PolicyName)
			assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, b.Spec.ValidationActions)
			if tt.selector == "" {
				assert.Nil(t, b.Spec.MatchResources, "bound to every namespace")
				return
			}
			require.NotNil(t, b.Spec.MatchResources)
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.MatchResources.NamespaceSelector)
			require.NoError(t, err)
			assert.Equal(t, tt.selector, sel.String())
		})
	}
}

func TestCatalogGuardsWithoutPlatformNamespacesBindEveryNamespace(t *testing.T) {
	rec := &mocktest.Recorder{}
	require.NoError(t, mocktest.Run("test", func(ctx *pulumi.Context) error {
		_, err := NewCatalog(ctx, "gpus", &CatalogArgs{Classes: []GPUClass{{Name: "a100", Device: WholeGPU, PlatformOnly: true}},
			Admission: AdmissionArgs{ClaimStatusWriters: cluster.StandardClaimStatusWriters}})
		return err
	}, rec))
	b := decode[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, get(t, rec, bindingType, "gpus-claim-namespaces"))
	assert.Nil(t, b.Spec.MatchResources)
}

func TestNewCatalogRejectsInvalidArgs(t *testing.T) {
	tests := []struct {
		name    string
		classes []GPUClass
		tenants []TenantArgs
		wantErr []string
	}{
		{"duplicate class", []GPUClass{{Name: "a", Device: WholeGPU}, {Name: "a", Device: WholeGPU}}, nil,
			[]string{`catalog.classes[1].name: Duplicate value: "a"`}},
		{"every problem at once", []GPUClass{{Name: "A", Device: WholeGPU}, {Name: "b", Device: "tpu"}}, nil,
			[]string{`catalog.classes[0].name`, `catalog.classes[1].device`}},
		{"a grant of a class not in the catalog", testClasses,
			[]TenantArgs{{Name: "team-c", Classes: []string{"h100"}, GPUQuota: map[string]int{"h100": 1}}},
			[]string{`catalog.grants[team-c][0]: Unsupported value: "h100"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := tryPlatform(tt.classes, tt.tenants...)
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.Empty(t, rec.All(), "nothing may be registered when args are invalid")
		})
	}
	t.Run("nil args", func(t *testing.T) {
		err := pulumi.RunErr(func(ctx *pulumi.Context) error {
			_, err := NewCatalog(ctx, "gpus", nil)
			return err
		}, pulumi.WithMocks("gpu-tenancy", "test", &mocktest.Recorder{}))
		assert.ErrorContains(t, err, "args are required")
	})
}

func TestAdmissionArgsValidate(t *testing.T) {
	tests := []struct {
		name      string
		args      AdmissionArgs
		wantPath  string
		wantWords string
	}{
		{"standard writers and a platform namespace", testAdmission, "", ""},
		{"a platform namespace that is a tenant's host namespace", AdmissionArgs{PlatformNamespaces: []string{"vcluster-team-a"}},
			"admission.platformNamespaces[0]", "tenant host namespaces"},
		{"a platform namespace that is no namespace name", AdmissionArgs{PlatformNamespaces: []string{"ML Platform"}},
			"admission.platformNamespaces[0]", "RFC 1123"},
		{"a platform namespace twice", AdmissionArgs{PlatformNamespaces: []string{"ml", "ml"}},
			"admission.platformNamespaces[1]", "Duplicate"},
		{"a tenant's syncer as a writer", AdmissionArgs{ClaimStatusWriters: []string{"system:serviceaccount:vcluster-team-a:vc-team-a"}},
			"admission.claimStatusWriters[0]", "never allocate devices themselves"},
		{"a writer with spaces", AdmissionArgs{ClaimStatusWriters: []string{" system:kube-scheduler"}},
			"admission.claimStatusWriters[0]", "user name"},
		{"a writer twice", AdmissionArgs{ClaimStatusWriters: []string{"a", "a"}}, "admission.claimStatusWriters[1]", "Duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.args.Validate(field.NewPath("admission"), []string{"team-a"})
			if tt.wantPath == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tt.wantPath, errs[0].Field)
			assert.Contains(t, errs[0].Error(), tt.wantWords)
		})
	}
}

func TestValidateClassOwners(t *testing.T) {
	classes := []GPUClass{{Name: "a100"}, {Name: "l4"}, {Name: "h100", PlatformOnly: true}}
	tests := []struct {
		name     string
		grants   map[string][]string
		platform bool
		wantPath string
		want     string
	}{
		{"every class has an owner", map[string][]string{"team-a": {"a100", "l4"}}, false, "", ""},
		{"a class granted to no tenant", map[string][]string{"team-a": {"a100"}}, false, "classes[1]", "grant it to one, or mark it platformOnly"},
		{"a platform-only class granted", map[string][]string{"team-a": {"a100", "l4", "h100"}}, false, "classes[2].platformOnly", "granted to team-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateClassOwners(field.NewPath("classes"), classes, tt.grants)
			if tt.wantPath == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			assert.Equal(t, tt.wantPath, errs[0].Field)
			assert.Contains(t, errs[0].Error(), tt.want)
		})
	}
}

func TestCatalogNeedsClaimStatusWriters(t *testing.T) {
	err := mocktest.Run("test", func(ctx *pulumi.Context) error {
		_, err := NewCatalog(ctx, "gpus", &CatalogArgs{Classes: []GPUClass{{Name: "a100", Device: WholeGPU, PlatformOnly: true}}})
		return err
	}, &mocktest.Recorder{})
	assert.ErrorContains(t, err, "catalog.admission.claimStatusWriters: Required value")
}

func TestClusterObjectsAreExactlyTheClusterScopedObjectsCreated(t *testing.T) {
	rec := runPlatform(t, testClasses, teamA(), teamB())
	var created []string
	for typ, kind := range map[string]string{deviceClassType: naming.KindDeviceClass, namespaceType: naming.KindNamespace,
		policyType: naming.KindPolicy, bindingType: naming.KindPolicyBinding, flowSchemaType: naming.KindFlowSchema,
		levelType: naming.KindPriorityLevel} {
		for _, reg := range rec.ByType(typ) {
			created = append(created, kind+"/"+reg.Inputs["metadata"].ObjectValue()["name"].StringValue())
		}
	}
	var listed []string
	for _, ref := range ClusterObjects(testClasses, []string{"team-a", "team-b"}) {
		listed = append(listed, ref.String())
	}
	assert.ElementsMatch(t, created, listed)
}

// Every tenant's flow schema is matched before the bootstrap probes schema, which would serve the tenant's health
// checks at the exempt level: a precedence below 2, or 2 and a name that sorts before it.
func TestATenantsFlowSchemaComesBeforeTheBootstrapProbes(t *testing.T) {
	for _, tenant := range []string{"a", "legal-ai", "zz-" + strings.Repeat("z", 40)} {
		name := naming.TenantFlowSchema(tenant)
		assert.True(t, tenantsPrecedence < 2 || (tenantsPrecedence == 2 && name < probesFlowSchema),
			"%s at precedence %d comes after %s at 2", name, tenantsPrecedence, probesFlowSchema)
	}
}

// Each tenant's requests go to a level of its own that borrows nothing: no tenant's request waits for a seat behind
// another tenant's burst, and a burst takes no more seats than its own level holds.
func TestEveryTenantHasAPriorityLevelOfItsOwnThatBorrowsNothing(t *testing.T) {
	rec := runPlatform(t, testClasses, teamA(), teamB())
	levels := map[string]resource.PropertyMap{}
	for _, reg := range rec.ByType(levelType) {
		levels[reg.Inputs["metadata"].ObjectValue()["name"].StringValue()] = reg.Inputs["spec"].ObjectValue()["limited"].ObjectValue()
	}
	pointedAt := map[string]string{}
	for _, reg := range rec.ByType(flowSchemaType) {
		name := reg.Inputs["metadata"].ObjectValue()["name"].StringValue()
		pointedAt[name] = reg.Inputs["spec"].ObjectValue()["priorityLevelConfiguration"].ObjectValue()["name"].StringValue()
	}
	for _, tenant := range []string{"team-a", "team-b"} {
		level := pointedAt[naming.TenantFlowSchema(tenant)]
		assert.Equal(t, naming.TenantPriorityLevel(tenant), level, "tenant %s's flow schema", tenant)
		spec, ok := levels[level]
		if !assert.True(t, ok, "tenant %s's level %s is created", tenant, level) {
			continue
		}
		assert.Equal(t, 0.0, spec["borrowingLimitPercent"].NumberValue(), "tenant %s's level borrows", tenant)
		assert.Equal(t, 1.0, spec["nominalConcurrencyShares"].NumberValue(), "tenant %s's level's shares", tenant)
	}
	assert.NotEqual(t, pointedAt[naming.TenantFlowSchema("team-a")], pointedAt[naming.TenantFlowSchema("team-b")])

	t.Run("a level no schema points at lends all its seats, so a tenant's share is one seat", func(t *testing.T) {
		spec, ok := levels[LentSeatsPriorityLevel]
		require.True(t, ok, "the lent-seats level is created")
		assert.Equal(t, 100.0, spec["lendablePercent"].NumberValue())
		assert.Equal(t, 0.0, spec["borrowingLimitPercent"].NumberValue())
		assert.NotContains(t, slices.Collect(maps.Values(pointedAt)), LentSeatsPriorityLevel, "no flow schema points at it")
		assert.Equal(t, "Reject", spec["limitResponse"].ObjectValue()["type"].StringValue(), "nothing waits for seats lent away")
		// The bootstrap levels' shares, as the API server creates them, and a default API server's seats
		// (--max-requests-inflight 400, --max-mutating-requests-inflight 200).
		bootstrapShares := 0
		for _, l := range append(slices.Clone(bootstrap.MandatoryPriorityLevelConfigurations), bootstrap.SuggestedPriorityLevelConfigurations...) {
			if l.Spec.Limited != nil {
				bootstrapShares += int(*l.Spec.Limited.NominalConcurrencyShares)
			}
		}
		const serverSeats = 600
		for _, tenants := range []int{1, 2, 100, 1000} {
			total := bootstrapShares + int(spec["nominalConcurrencyShares"].NumberValue()) + tenants
			assert.Equal(t, 1, (serverSeats+total-1)/total, "a tenant's seats among %d tenants", tenants)
		}
	})
}
