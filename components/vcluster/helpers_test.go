package vcluster

import (
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/require"
)

const (
	releaseType   = "kubernetes:helm.sh/v3:Release"
	chartType     = "kubernetes:helm.sh/v4:Chart"
	secretType    = "kubernetes:core/v1:Secret"
	namespaceType = "kubernetes:core/v1:Namespace"
)

// testKubeconfig is what a vCluster's exported kubeconfig Secret holds under mocks: inline CA and client
// certificate, and a server the export must not keep.
var testKubeconfig = exported(certUser, "")

func newRecorder() *mocktest.Recorder {
	return &mocktest.Recorder{Outputs: map[string]func(resource.PropertyMap) resource.PropertyMap{
		secretType: func(resource.PropertyMap) resource.PropertyMap {
			return resource.PropertyMap{"data": resource.NewProperty(resource.PropertyMap{
				KubeconfigSecretKey: resource.NewProperty(base64.StdEncoding.EncodeToString([]byte(testKubeconfig)))})}
		},
	}}
}

// run runs program under mocks, recording into r.
func run(t *testing.T, r *mocktest.Recorder, program pulumi.RunFunc) {
	t.Helper()
	require.NoError(t, mocktest.Run("test", program, r))
}

// reads lists the resources the program read rather than managed, as "type name".
func reads(r *mocktest.Recorder) []string {
	var out []string
	for _, reg := range r.All() {
		if reg.Read {
			out = append(out, reg.Type+" "+reg.Name)
		}
	}
	return out
}

// valuesOf returns the values of a Helm release or chart as plain JSON-shaped data.
func valuesOf(t *testing.T, r *mocktest.Recorder, name string) map[string]any {
	t.Helper()
	rel, err := r.Get(releaseType, name)
	if err != nil {
		rel, err = r.Get(chartType, name)
	}
	require.NoError(t, err)
	require.False(t, rel.Inputs["values"].ContainsSecrets(), "release values never hold secrets")
	return rel.Inputs["values"].Mappable().(map[string]any)
}

// awaitOutput returns an output's value; outputs built from constants resolve outside the program's run.
func awaitOutput(t *testing.T, o pulumi.Output) any {
	t.Helper()
	ch := make(chan any, 1)
	o.ApplyT(func(v any) any { ch <- v; return v })
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("output never resolved")
		return nil
	}
}

// decode re-reads JSON-shaped data into a typed struct.
func decode[T any](t *testing.T, v any) T {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	var out T
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}
