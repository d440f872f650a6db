package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stackOf is the local stack's environment in three tenant groups, with tenants as given, as Open prepares one of
// its stacks for the record of what an up applies.
func stackOf(t *testing.T, stack string, tenants []map[string]any, work string) *Stack {
	t.Helper()
	file := filepath.Join("..", "..", "..", "stacks", "Pulumi.local.yaml")
	raw, err := json.Marshal(tenants)
	require.NoError(t, err)
	o := Options{Stack: stack, WorkDir: work, Config: map[string]string{
		platform.ConfigNamespace + ":tenantGroups": "3", platform.ConfigNamespace + ":tenants": string(raw)}}
	sc, err := platform.ReadStackFile(file)
	require.NoError(t, err)
	for k, v := range o.Config {
		sc.Values[k] = v
	}
	args, err := platform.Load(sc.Source(), platform.ConfigKeys)
	require.NoError(t, err)
	cfg, err := partConfig(o, file, args)
	require.NoError(t, err)
	return &Stack{opts: o, partConfig: cfg}
}

func tenant(name, cpu string) map[string]any {
	return map[string]any{"name": name, "classes": []string{"gpu-whole", "gpu-slice"}, "cpuQuota": cpu,
		"gpuQuota": map[string]int{"gpu-whole": 1, "gpu-slice": 1}}
}

// A group's stack is unchanged by a tenant of another group, and changed by one of its own, by the platform's
// kubeconfig and by a failed or interrupted operation; the platform stack changes with any tenant.
func TestWhatAnUpAppliedIsOnlyItsPart(t *testing.T) {
	// legal-ai and research-ai are in groups 2 and 0 of three (components/platform parts_test.go).
	base := []map[string]any{tenant("legal-ai", "8"), tenant("research-ai", "8")}
	work := map[string]string{"local": t.TempDir(), "local.tenants-0": t.TempDir(), "local.tenants-2": t.TempDir()}
	upstream := map[string]string{"local": "", "local.tenants-0": "kubeconfig", "local.tenants-2": "kubeconfig"}
	for stack, dir := range work {
		require.NoError(t, stackOf(t, stack, base, dir).recordApplied(upstream[stack]))
	}
	unchanged := func(stack string, tenants []map[string]any, upstream string) bool {
		return stackOf(t, stack, tenants, work[stack]).unchanged(upstream)
	}

	assert.True(t, unchanged("local", base, ""), "nothing changed")
	assert.True(t, unchanged("local.tenants-0", base, "kubeconfig"), "nothing changed")
	legalChanged := []map[string]any{tenant("legal-ai", "9"), tenant("research-ai", "8")}
	assert.True(t, unchanged("local.tenants-0", legalChanged, "kubeconfig"), "another group's tenant changed")
	assert.False(t, unchanged("local.tenants-2", legalChanged, "kubeconfig"), "its own tenant changed")
	assert.False(t, unchanged("local", legalChanged, ""), "the platform stack labels the classes of every tenant")
	assert.False(t, unchanged("local.tenants-0", base, "another kubeconfig"), "the platform's cluster changed")
	spelt := []map[string]any{tenant("legal-ai", "8"), tenant("research-ai", "8")}
	spelt[1]["podSecurity"] = "baseline" // the default, spelt out
	assert.True(t, unchanged("local.tenants-0", spelt, "kubeconfig"), "the same config spelt another way")

	st := stackOf(t, "local.tenants-0", base, work["local.tenants-0"])
	done, err := st.begin(OpUp)
	require.NoError(t, err)
	done()
	assert.False(t, st.unchanged("kubeconfig"), "an operation since the last recorded up, whatever its outcome")
	_, err = os.Stat(filepath.Join(work["local.tenants-0"], appliedRecord))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
