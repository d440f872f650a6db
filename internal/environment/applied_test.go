package environment

import (
	"encoding/json"
	"fmt"
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
	return heldStackOf(t, stack, tenants, work, nil)
}

// heldStackOf is stackOf with the groups whose stacks hold tenants, as the environment reads them from the states.
func heldStackOf(t *testing.T, stack string, tenants []map[string]any, work string, held map[string]int) *Stack {
	t.Helper()
	file := filepath.Join("..", "..", "stacks", "Pulumi.local.yaml")
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
	cfg, err := partConfig(o, file, args, held)
	require.NoError(t, err)
	return &Stack{opts: o, partConfig: cfg}
}

// tenant is a tenant entry recorded in group, or in none when group is negative.
func tenant(name, cpu string, group int) map[string]any {
	t := map[string]any{"name": name, "classes": []string{"gpu-whole", "gpu-slice"}, "cpuQuota": cpu,
		"gpuQuota": map[string]int{"gpu-whole": 1, "gpu-slice": 1}}
	if group >= 0 {
		t["group"] = group
	}
	return t
}

// A group's stack is unchanged by a tenant recorded in another group, and changed by one of its own, by a tenant whose
// group only the cluster says, by the platform's kubeconfig and by a failed or interrupted operation; the platform
// stack changes with any tenant.
func TestWhatAnUpAppliedIsOnlyItsPart(t *testing.T) {
	base := []map[string]any{tenant("legal-ai", "8", 2), tenant("research-ai", "8", 0)}
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
	legalChanged := []map[string]any{tenant("legal-ai", "9", 2), tenant("research-ai", "8", 0)}
	assert.True(t, unchanged("local.tenants-0", legalChanged, "kubeconfig"), "another group's tenant changed")
	assert.False(t, unchanged("local.tenants-2", legalChanged, "kubeconfig"), "its own tenant changed")
	assert.False(t, unchanged("local", legalChanged, ""), "the platform stack labels the classes of every tenant")
	assert.False(t, unchanged("local.tenants-0", base, "another kubeconfig"), "the platform's cluster changed")
	unplaced := []map[string]any{tenant("legal-ai", "8", 2), tenant("research-ai", "8", 0), tenant("audit-ai", "8", -1)}
	assert.False(t, unchanged("local.tenants-2", unplaced, "kubeconfig"), "a tenant placed by the cluster may be any group's")
	assert.False(t, unchanged("local.tenants-0", unplaced, "kubeconfig"), "a tenant placed by the cluster may be any group's")
	heldUnchanged := func(stack string, tenants []map[string]any, held map[string]int) bool {
		return heldStackOf(t, stack, tenants, work[stack], held).unchanged("kubeconfig")
	}
	assert.True(t, heldUnchanged("local.tenants-0", unplaced, map[string]int{"audit-ai": 2}), "a tenant another group's stack holds")
	assert.False(t, heldUnchanged("local.tenants-2", unplaced, map[string]int{"audit-ai": 2}), "a tenant its own stack holds")
	newTenantGroup := platform.TenantGroup("audit-ai", 3)
	for _, g := range []int{0, 2} {
		assert.Equal(t, g != newTenantGroup, heldUnchanged(fmt.Sprintf("local.tenants-%d", g), unplaced, map[string]int{}),
			"a tenant no stack holds is its hash's group's (group %d)", newTenantGroup)
	}
	spelt := []map[string]any{tenant("legal-ai", "8", 2), tenant("research-ai", "8", 0)}
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
