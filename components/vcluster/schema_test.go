package vcluster

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/gomod"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chartSchema compiles values.schema.json of the vCluster chart shipped in the loft-sh/vcluster Go module.
func chartSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	dir, err := gomod.Dir("github.com/loft-sh/vcluster", "v"+VClusterVersion)
	require.NoError(t, err)
	f, err := os.Open(filepath.Join(dir, "chart", "values.schema.json"))
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("values.schema.json", doc))
	schema, err := c.Compile("values.schema.json")
	require.NoError(t, err)
	return schema
}

// instance turns release values into what the schema validator reads.
func instance(t *testing.T, values map[string]any) any {
	t.Helper()
	raw, err := json.Marshal(values)
	require.NoError(t, err)
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	require.NoError(t, err)
	return inst
}

// releasedValues are the values the component hands its Helm release.
func releasedValues(t *testing.T, args *VirtualClusterArgs) map[string]any {
	t.Helper()
	r := newRecorder()
	runVirtualCluster(t, r, args)
	return valuesOf(t, r, "team-a")
}

// valueCases are args that between them set every value the component renders.
func valueCases() []struct {
	name string
	args *VirtualClusterArgs
} {
	platform := &PlatformConnection{Host: "platform.example.com", Project: DefaultProject}
	return []struct {
		name string
		args *VirtualClusterArgs
	}{
		{"minimal", tenantArgs(nil)},
		{"GPU tolerations", tenantArgs(func(a *VirtualClusterArgs) {
			a.GPUTolerations = []cluster.Taint{cluster.GPUTaint, {Key: "example.com/h100", Effect: "NoExecute"}}
		})},
		{"sized control plane", tenantArgs(func(a *VirtualClusterArgs) {
			a.ControlPlane = ControlPlane{CPU: "200m", Memory: "2Gi", StorageSize: "10Gi", StorageClass: "standard-rwo"}
		})},
		{"exported kubeconfig", tenantArgs(func(a *VirtualClusterArgs) { a.KubeconfigServer = "https://team-a.vc.example.com" })},
		{"baseline pod security", tenantArgs(func(a *VirtualClusterArgs) { a.PodSecurity = "baseline" })},
		{"restricted pod security", tenantArgs(func(a *VirtualClusterArgs) { a.PodSecurity = "restricted" })},
		{"platform connection", tenantArgs(func(a *VirtualClusterArgs) { a.Platform = platform })},
		{"local chart, everything", tenantArgs(func(a *VirtualClusterArgs) {
			a.Chart = helmchart.Chart{Path: "/charts/vcluster"}
			a.GPUTolerations = []cluster.Taint{cluster.GPUTaint}
			a.ControlPlane = ControlPlane{}.WithDefaults()
			a.KubeconfigServer = "https://10.0.0.1:8443"
			a.Platform, a.PlatformAccessKey = platform, pulumi.String("key")
			a.PodSecurity = "restricted"
			a.Await = true
		})},
		{"extended resources only", tenantArgs(func(a *VirtualClusterArgs) {
			a.GPUAccess = ExtendedResources
			a.OfferedClasses = []OfferedClass{{Class: "a100", ResourceName: "gpu-tenancy.io/a100", Gives: "a whole NVIDIA A100-SXM4-40GB", Quota: 2}}
		})},
		{"extended resources only, local chart and images", tenantArgs(func(a *VirtualClusterArgs) {
			a.Chart = helmchart.Chart{Path: "/charts/vcluster"}
			a.GPUAccess = ExtendedResources
			a.Images = Images{ControlPlane: "registry.example.com/vcluster-pro:0.36.1", OpenSourceControlPlane: "registry.example.com/vcluster-oss:0.36.1"}
			a.PodSecurity = "restricted"
		})},
		{"claims and extended resources", tenantArgs(func(a *VirtualClusterArgs) { a.GPUAccess = BothAccess; a.Platform = platform })},
	}
}

func TestVirtualClusterValuesMatchChartSchema(t *testing.T) {
	schema := chartSchema(t)
	for _, tc := range valueCases() {
		t.Run(tc.name, func(t *testing.T) {
			assert.NoError(t, schema.Validate(instance(t, releasedValues(t, tc.args))))
		})
	}
}

func TestChartSchemaRejectsMisspeltKeys(t *testing.T) {
	schema := chartSchema(t)
	for _, tc := range []struct {
		name     string
		misspell func(v map[string]any)
	}{
		{"top level", func(v map[string]any) { v["exportKubeconfig"] = map[string]any{"server": "https://x"} }},
		{"nested selector", func(v map[string]any) {
			dc := v["sync"].(map[string]any)["fromHost"].(map[string]any)["deviceClasses"].(map[string]any)
			dc["selectors"] = dc["selector"]
			delete(dc, "selector")
		}},
		{"sync switch", func(v map[string]any) {
			th := v["sync"].(map[string]any)["toHost"].(map[string]any)
			th["resourceClaim"] = th["resourceClaims"]
			delete(th, "resourceClaims")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := releasedValues(t, tenantArgs(nil))
			tc.misspell(values)
			assert.Error(t, schema.Validate(instance(t, values)))
		})
	}
}
