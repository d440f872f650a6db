package provider

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/blang/semver"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestSchemaIsCurrent(t *testing.T) {
	reference, err := os.ReadFile("../docs/installation-configuration.md")
	require.NoError(t, err)
	generated, err := Schema(reference)
	require.NoError(t, err)
	assert.Equal(t, string(generated), schemaJSON, "provider/schema.json is stale: run `make schema`")
}

func TestSchemaDescribesEveryPropertyAndMarksSecrets(t *testing.T) {
	var spec schema.PackageSpec
	require.NoError(t, json.Unmarshal([]byte(schemaJSON), &spec))
	res := spec.Resources[platform.Type]
	require.True(t, res.IsComponent)
	for _, prop := range platform.Properties() {
		in, ok := res.InputProperties[prop.Name]
		require.True(t, ok, "input %s", prop.Name)
		assert.NotEmpty(t, in.Description, "input %s has no row in the config reference", prop.Name)
		assert.Equal(t, prop.Secret, in.Secret, "input %s", prop.Name)
	}
	assert.True(t, res.Properties["kubeconfig"].Secret)
	tenant := spec.Types[typePrefix+"Tenant"]
	assert.Contains(t, tenant.Properties["gpuQuota"].Description, "devices of that class the tenant may hold")
	assert.Equal(t, "integer", tenant.Properties["gpuQuota"].AdditionalProperties.Type)
	pool := spec.Types[typePrefix+"GpuPool"]
	for _, field := range []string{"name", "partition", "minNodes", "machineType", "accelerator", "nodeType", "model"} {
		assert.Contains(t, pool.Properties, field, "gpuPools merges every cloud's pool fields")
	}
}

func TestAReferenceRowForAKeyThatDoesNotExistFailsTheSchema(t *testing.T) {
	reference := []byte("## Config reference\n\n| key | default | meaning |\n|---|---|---|\n| `cloud` | (required) | where |\n" +
		"| `tenants[].gpuQuotas` | | misspelt |\n\n## Next\n")
	_, err := Schema(reference)
	require.ErrorContains(t, err, "documents keys the Platform does not have: tenants[].gpuQuotas")
}

// registrations records what a construct registers.
type registrations struct {
	mu   sync.Mutex
	regs []integration.MockResourceArgs
}

func (r *registrations) server(t *testing.T) integration.Server {
	s, err := integration.NewServer(t.Context(), Name, semver.MustParse(Version), integration.WithProvider(New()),
		integration.WithMocks(&integration.MockResourceMonitor{NewResourceF: func(args integration.MockResourceArgs) (string, property.Map, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.regs = append(r.regs, args)
			return args.Name + "-id", args.Inputs, nil
		}}))
	require.NoError(t, err)
	return s
}

func (r *registrations) count(token string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, reg := range r.regs {
		if string(reg.TypeToken) == token {
			n++
		}
	}
	return n
}

// unreachable is a kubeconfig of a cluster that does not answer: the ownership check warns and goes on.
const unreachable = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
	"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n"

func goodInputs() map[string]property.Value {
	str := property.New[string]
	obj := func(kv map[string]property.Value) property.Value { return property.New(property.NewMap(kv)) }
	arr := func(vs ...property.Value) property.Value { return property.New(property.NewArray(vs)) }
	return map[string]property.Value{
		"cloud":      str("existing"),
		"kubeconfig": str(unreachable).WithSecret(true),
		"gpuPools": arr(
			obj(map[string]property.Value{"name": str("a100-whole"), "model": str("a100-40gb")}),
			obj(map[string]property.Value{"name": str("a100-mig"), "model": str("a100-40gb"), "partition": str("1g.5gb")})),
		"gpuClasses": arr(
			obj(map[string]property.Value{"name": str("gpu-whole"), "device": str("gpu"), "product": str("A100")}),
			obj(map[string]property.Value{"name": str("gpu-slice"), "device": str("mig"), "migProfile": str("1g.5gb")})),
		"tenants": arr(
			obj(map[string]property.Value{"name": str("vision"), "classes": arr(str("gpu-whole")),
				"gpuQuota": obj(map[string]property.Value{"gpu-whole": property.New(2.0)})}),
			obj(map[string]property.Value{"name": str("speech"), "classes": arr(str("gpu-slice")),
				"gpuQuota": obj(map[string]property.Value{"gpu-slice": property.New(4.0)})})),
		"draDriver": obj(map[string]property.Value{"enabled": property.New(false)}),
		"platform":  obj(map[string]property.Value{"enabled": property.New(false)}),
		"vcluster":  obj(map[string]property.Value{"await": property.New(false)}),
	}
}

func constructRequest(inputs map[string]property.Value, dryRun bool) p.ConstructRequest {
	return p.ConstructRequest{
		Urn:    resource.NewURN("dev", "team", "", platform.Type, "gpus"),
		Inputs: property.NewMap(inputs),
		DryRun: dryRun,
	}
}

func TestConstructBuildsThePlatform(t *testing.T) {
	var r registrations
	resp, err := r.server(t).Construct(constructRequest(goodInputs(), false))
	require.NoError(t, err)
	assert.Equal(t, 1, r.count(platform.Type))
	assert.Equal(t, 2, r.count("gpu-tenancy:tenancy:Tenant"), "vision and speech")
	assert.Equal(t, 2, r.count("kubernetes:resource.k8s.io/v1:DeviceClass"))
	assert.Equal(t, 2, r.count("gpu-tenancy:vcluster:VirtualCluster"))
	assert.Equal(t, "existing", resp.State.Get("flavour").AsString())
	assert.True(t, resp.State.Get("kubeconfig").Secret(), "the kubeconfig output stays secret")
	tenants := resp.State.Get("tenants").AsMap()
	assert.ElementsMatch(t, []string{"speech", "vision"}, slices.Collect(maps.Keys(tenants.AsMap())))
	assert.Equal(t, "vcluster-vision", tenants.Get("vision").AsMap().Get("namespace").AsString())
}

func TestConstructRefusesBadArgumentsAtTheirPropertyPaths(t *testing.T) {
	cases := map[string]struct {
		mutate func(in map[string]property.Value)
		paths  []string
	}{
		"a bad tenant name and a quota for a class not granted": {func(in map[string]property.Value) {
			tenants := in["tenants"].AsArray().AsSlice()
			first := tenants[0].AsMap().Set("name", property.New("Vision_AI")).
				Set("gpuQuota", property.New(property.NewMap(map[string]property.Value{"gpu-whole": property.New(2.0), "gpu-slice": property.New(1.0)})))
			in["tenants"] = property.New(property.NewArray(append([]property.Value{property.New(first)}, tenants[1:]...)))
		}, []string{"tenants[0].name", `tenants[0].gpuQuota["gpu-slice"]`}},
		"a property the component does not have": {func(in map[string]property.Value) { in["tenant"] = property.New("x") }, []string{"tenant"}},
		"a kubeconfig that is not a secret":      {func(in map[string]property.Value) { in["kubeconfig"] = property.New(unreachable) }, []string{"kubeconfig"}},
		"a value of the wrong type": {func(in map[string]property.Value) {
			in["timeouts"] = property.New(property.NewMap(map[string]property.Value{"namespaceDeletion": property.New(10.0)}))
		}, []string{"timeouts.namespaceDeletion"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			in := goodInputs()
			c.mutate(in)
			var r registrations
			_, err := r.server(t).Construct(constructRequest(in, false))
			require.Error(t, err)
			var paths []string
			for _, d := range propertyErrors(t, err) {
				paths = append(paths, d.GetPropertyPath())
			}
			for _, want := range c.paths {
				assert.Contains(t, paths, want)
			}
			assert.NotContains(t, err.Error(), "gpu-tenancy:", "properties, not stack config keys")
			assert.NotContains(t, err.Error(), "apiVersion: v1", "no secret value in an error")
			assert.Zero(t, len(r.regs), "nothing registered on bad input: %v", r.regs)
		})
	}
}

func TestAnUnknownValueInAPreviewIsReportedAtItsPath(t *testing.T) {
	in := goodInputs()
	in["kubeconfig"] = property.New(property.Computed).WithSecret(true)
	var r registrations
	_, err := r.server(t).Construct(constructRequest(in, true))
	details := propertyErrors(t, err)
	require.Len(t, details, 1)
	assert.Equal(t, "kubeconfig", details[0].GetPropertyPath())
	assert.Contains(t, details[0].GetReason(), "must be known when the Platform is constructed")
	assert.Empty(t, r.regs)
}

// propertyErrors are the problems an error carries to the engine: an InvalidArgument status whose details list each
// property path, which the engine prints with its value.
func propertyErrors(t *testing.T, err error) []*pulumirpc.InputPropertiesError_PropertyError {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "a gRPC status, got %T: %v", err, err)
	require.Equal(t, codes.InvalidArgument, st.Code(), "%v", err)
	for _, d := range st.Details() {
		if ipe, ok := d.(*pulumirpc.InputPropertiesError); ok {
			return ipe.GetErrors()
		}
	}
	t.Fatalf("no property errors in %v", err)
	return nil
}

func TestPropertyPathsQuoteMapKeys(t *testing.T) {
	for in, want := range map[string]string{
		"tenants[0].name":                  "tenants[0].name",
		"tenants[1].gpuQuota[gpu-slice]":   `tenants[1].gpuQuota["gpu-slice"]`,
		"prices.perDeviceHour[gpu-whole]":  `prices.perDeviceHour["gpu-whole"]`,
		"platformAccessKeys[research-ai]":  `platformAccessKeys["research-ai"]`,
		"gpuClasses[12].extraCEL":          "gpuClasses[12].extraCEL",
		"tenants[0].objectQuota[pods]":     `tenants[0].objectQuota["pods"]`,
		`tenants[0].gpuQuota["gpu-whole"]`: `tenants[0].gpuQuota["gpu-whole"]`,
	} {
		assert.Equal(t, want, propertyPath(in), in)
	}
}

func TestConfigKeysPageIsCurrent(t *testing.T) {
	reference, err := os.ReadFile("../docs/installation-configuration.md")
	require.NoError(t, err)
	stacks, err := StackFiles("..")
	require.NoError(t, err)
	generated, err := Reference(reference, stacks)
	require.NoError(t, err)
	committed, err := os.ReadFile("../docs/config-reference.md")
	require.NoError(t, err)
	assert.Equal(t, string(generated), string(committed), "docs/config-reference.md is stale: run `make schema`")
}

// The config keys page has a row for every key of the schema, with its type, and the allowed values of the keys the
// validation checks against a list.
func TestConfigKeysPageListsEveryKeyWithItsTypeAndAllowedValues(t *testing.T) {
	reference, err := os.ReadFile("../docs/installation-configuration.md")
	require.NoError(t, err)
	page, err := Reference(reference, nil)
	require.NoError(t, err)
	text := string(page)
	for _, row := range []string{
		"| `cloud` | string | (required) | `existing`, `gke`, `scaleway` |",
		"| `tenants[].gpuAccess` | string | `vcluster.gpuAccess` | `both`, `claims`, `extendedResources` |",
		"| `tenants[].gpuQuota` | map of integer |",
		"| `serviceRange.cidr` | string |",
		"| `existing.podCIDRs` | list of string |",
		"| `gke.deletionProtection` | boolean | `true` | `true`, `false` | `true` |",
	} {
		assert.Contains(t, text, row)
	}
	assert.Contains(t, text, "| `tenants[].objectQuota` | map of integer | ", "a map's names")
	assert.Regexp(t, "\\| `tenants\\[\\]\\.objectQuota` \\| map of integer \\| [^|]* \\| names: [^|]*`services`", text)
}

func TestAllowedValuesOfAKeyThatDoesNotExistFailThePage(t *testing.T) {
	reference := []byte("## Config reference\n\n| key | default | meaning |\n|---|---|---|\n| `cloud` | (required) | where |\n\n## Next\n")
	_, err := referencePage(reference, nil, map[string][]string{"cloud": {"gke"}, "tenants[].gpuAcces": {"claims"}})
	require.ErrorContains(t, err, "the allowed values name keys the schema does not have: tenants[].gpuAcces")
	_, err = Reference(reference, nil)
	require.NoError(t, err, "every key platform.AllowedValues names is in the schema")
}
