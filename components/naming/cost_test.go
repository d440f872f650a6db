package naming

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCostStackValue(t *testing.T) {
	for _, tc := range []struct {
		name, project, stack, want string
	}{
		{"project and stack joined by an underscore", "gpu-tenancy", "gke-dev", "gpu-tenancy_gke-dev"},
		{"upper case lowered", "gpu-tenancy", "Prod", "gpu-tenancy_prod"},
		{"characters GCP refuses replaced", "gpu-tenancy", "eu.prod.1", "gpu-tenancy_eu_prod_1"},
		{"cut to 63 characters", "gpu-tenancy", strings.Repeat("s", 80), "gpu-tenancy_" + strings.Repeat("s", 63-len("gpu-tenancy_"))},
		{"ends trimmed to a letter or digit, as a Kubernetes label value must", "gpu-tenancy", "dev-", "gpu-tenancy_dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, CostStackValue(tc.project, tc.stack))
		})
	}
}

func TestCostLabels(t *testing.T) {
	assert.Equal(t, map[string]string{CostStackKey: "s"}, CostLabels("s", "", ""), "a cluster")
	assert.Equal(t, map[string]string{CostStackKey: "s", CostPoolKey: CostSystemPool}, CostLabels("s", CostSystemPool, ""), "the system pool")
	assert.Equal(t, map[string]string{CostStackKey: "s", CostPoolKey: "a100", CostGPUModelKey: "a100-40gb"},
		CostLabels("s", "a100", "a100-40gb"), "a GPU pool")
}
