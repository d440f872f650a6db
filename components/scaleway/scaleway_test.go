package scaleway

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

func TestCostStackValueIsValidHere(t *testing.T) {
	for _, stack := range []string{"dev", "Prod", "eu.prod.1", "dev-", strings.Repeat("s", 80)} {
		got := naming.CostStackValue("gpu-tenancy", stack)
		assert.Empty(t, validateTagValue(field.NewPath("stack"), naming.CostStackKey, got), "%q is a valid tag value", got)
	}
}

func TestValidateRefusesPoolNamesThatAreNoTagValues(t *testing.T) {
	for _, tc := range []struct {
		name, pool string
	}{
		{"a slash", "l4/a"},
		{"longer than 63 characters", strings.Repeat("a", 64)},
		{"ends with a dash", "l4-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := ClusterArgs{Zone: "fr-par-2", KubernetesVersion: "1.35", CNI: "cilium",
				GPUPools: []GPUPoolSpec{{PoolSpec: cluster.PoolSpec{Name: tc.pool}, NodeType: "L4-1-24G"}}}
			errs := args.Validate(field.NewPath("gpu-tenancy:scaleway"), field.NewPath("gpu-tenancy:gpuPools"), cluster.Date(2026, 12, 5))
			var tagErrs []string
			for _, e := range errs {
				if strings.Contains(e.Detail, "tag "+naming.CostPoolKey) {
					tagErrs = append(tagErrs, e.Field)
				}
			}
			assert.Equal(t, []string{"gpu-tenancy:gpuPools[0].name"}, tagErrs, "%v", errs)
		})
	}
}

// Every node type's GPU model becomes a tag value: a table entry whose key the nodes could not carry as a label must
// fail here, not at `up`.
func TestEveryNodeTypeModelIsATagValue(t *testing.T) {
	for name, nt := range nodeTypes {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, validateTagValue(field.NewPath("nodeType"), naming.CostGPUModelKey, nt.model.Key))
		})
	}
}
