package gke

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
		assert.Empty(t, validateLabelValue(field.NewPath("stack"), naming.CostStackKey, got), "%q is a valid GCP label value", got)
	}
}

func TestValidateRefusesPoolNamesThatAreNoLabelValues(t *testing.T) {
	for _, tc := range []struct {
		name, pool string
	}{
		{"upper case", "A100"},
		{"a dot", "a100.whole"},
		{"longer than 63 characters", strings.Repeat("a", 64)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := ClusterArgs{Project: "acme-gpu", Zone: "us-central1-a", GPUPools: []GPUPoolSpec{{
				PoolSpec: cluster.PoolSpec{Name: tc.pool}, MachineType: "a2-highgpu-1g", Accelerator: "nvidia-tesla-a100"}}}
			errs := args.Validate(field.NewPath("gpu-tenancy:gke"), field.NewPath("gpu-tenancy:gpuPools"), cluster.Date(2026, 12, 5))
			var labelErrs []string
			for _, e := range errs {
				if strings.Contains(e.Detail, "GCP label "+naming.CostPoolKey) {
					labelErrs = append(labelErrs, e.Field)
				}
			}
			assert.Equal(t, []string{"gpu-tenancy:gpuPools[0].name"}, labelErrs, "%v", errs)
		})
	}
}

// Every accelerator's GPU model becomes a label value: a table entry whose key GCP would refuse must fail here, not at
// `up`.
func TestEveryAcceleratorModelIsALabelValue(t *testing.T) {
	for name, acc := range accelerators {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, validateLabelValue(field.NewPath("accelerator"), naming.CostGPUModelKey, acc.model.Key))
		})
	}
}
