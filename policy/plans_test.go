package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/plan"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fromPlan reads a plan value (internal/plan's JSON) as the engine would hand it over: the plan's placeholders for
// secrets and unknowns become unknown values, which is all a policy may assume of a value it cannot see.
func fromPlan(v any) property.Value {
	switch v := v.(type) {
	case string:
		if v == plan.Secret || v == plan.Unknown {
			return property.New(property.Computed)
		}
		return property.New(v)
	case map[string]any:
		m := make(map[string]property.Value, len(v))
		for k, e := range v {
			m[k] = fromPlan(e)
		}
		return property.New(m)
	case []any:
		a := make([]property.Value, len(v))
		for i, e := range v {
			a[i] = fromPlan(e)
		}
		return property.New(a)
	}
	return val(v)
}

// TestCommittedPlans runs the pack over every committed plan (stacks/plans), which records each resource the program
// registers with its inputs: the mandatory policies hold on all of them. The advisory's findings are logged.
func TestCommittedPlans(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "stacks", "plans", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			var p plan.Plan
			require.NoError(t, json.Unmarshal(raw, &p))
			var stack []resource
			for _, r := range p.Resources {
				inputs := fromPlan(r.Inputs)
				stack = append(stack, resource{Type: r.Type, Name: r.Name, URN: urnOf(r.Type, r.Name), Props: inputs.AsMap()})
			}
			mandatory := checkTenantNamespaces(stack)
			var advisory []violation
			for _, r := range stack {
				mandatory = append(mandatory, checkGPUPoolTaint(r)...)
				mandatory = append(mandatory, checkDedicatedPoolTaint(r)...)
				mandatory = append(mandatory, checkVClusterClassSelector(r)...)
				mandatory = append(mandatory, checkDeviceClassOwner(r)...)
				advisory = append(advisory, checkCostLabels(r)...)
			}
			assert.Empty(t, messages(mandatory))
			for _, v := range advisory {
				t.Logf("advisory: %s", v.Message)
			}
		})
	}
}
