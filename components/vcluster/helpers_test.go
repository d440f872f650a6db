package vcluster

import (
	"encoding/base64"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/mocktest"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/require"
)

const (
	releaseType   = "kubernetes:helm.sh/v3:Release"
	secretType    = "kubernetes:core/v1:Secret"
	namespaceType = "kubernetes:core/v1:Namespace"
)

// recorder adds what mocktest.Registration does not keep of a resource read: the id and the explicit dependencies.
type recorder struct {
	*mocktest.Recorder
	mu    sync.Mutex
	reads map[string]pulumi.MockResourceArgs
}

// testKubeconfig is what a vCluster's exported kubeconfig Secret holds under mocks.
const testKubeconfig = "apiVersion: v1\nkind: Config\nclusters: []\n"

func newRecorder() *recorder {
	rec := &mocktest.Recorder{Outputs: map[string]func(resource.PropertyMap) resource.PropertyMap{
		secretType: func(resource.PropertyMap) resource.PropertyMap {
			return resource.PropertyMap{"data": resource.NewProperty(resource.PropertyMap{
				KubeconfigSecretKey: resource.NewProperty(base64.StdEncoding.EncodeToString([]byte(testKubeconfig)))})}
		},
	}}
	return &recorder{Recorder: rec, reads: map[string]pulumi.MockResourceArgs{}}
}

func (r *recorder) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	if args.ReadRPC != nil {
		r.mu.Lock()
		r.reads[args.Name] = args
		r.mu.Unlock()
	}
	return r.Recorder.NewResource(args)
}

func (r *recorder) run(t *testing.T, program pulumi.RunFunc) {
	t.Helper()
	require.NoError(t, pulumi.RunErr(program, pulumi.WithMocks("gpu-tenancy", "test", r)))
}

// valuesOf returns a Helm release's values as plain JSON-shaped data.
func valuesOf(t *testing.T, r *recorder, name string) map[string]any {
	t.Helper()
	rel, err := r.Get(releaseType, name)
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
