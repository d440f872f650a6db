package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var root = field.NewPath("gpu-tenancy:gpuPools").Index(0)

// fields lists the paths and messages of errs, for assertions that read like the config.
func fields(errs field.ErrorList) map[string]string {
	out := map[string]string{}
	for _, e := range errs {
		out[e.Field] = e.Error()
	}
	return out
}

func TestPoolSpecValidate(t *testing.T) {
	cases := []struct {
		name      string
		spec      PoolSpec
		wantPath  string
		wantWords string
	}{
		{"a valid pool", PoolSpec{Name: "a100"}, "", ""},
		{"name missing", PoolSpec{}, "gpu-tenancy:gpuPools[0].name", "DNS-1123 label"},
		{"name not a DNS label", PoolSpec{Name: "A100_Whole"}, "gpu-tenancy:gpuPools[0].name", "RFC 1123"},
		{"the system pool's name", PoolSpec{Name: "system"}, "gpu-tenancy:gpuPools[0].name", "names a pool without GPUs (system, tenants)"},
		{"the tenant pool's name", PoolSpec{Name: "tenants"}, "gpu-tenancy:gpuPools[0].name", "names a pool without GPUs"},
		{"negative minimum", PoolSpec{Name: "a", NodeBounds: NodeBounds{MinNodes: ptr(-1)}}, "gpu-tenancy:gpuPools[0].minNodes", "0 or more"},
		{"maximum below one", PoolSpec{Name: "a", NodeBounds: NodeBounds{MaxNodes: ptr(0)}}, "gpu-tenancy:gpuPools[0].maxNodes", "at least 1"},
		{"maximum below minimum", PoolSpec{Name: "a", NodeBounds: NodeBounds{MinNodes: ptr(3), MaxNodes: ptr(2)}}, "gpu-tenancy:gpuPools[0].maxNodes", "at least 3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := fields(c.spec.Validate(root))
			if c.wantPath == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got[c.wantPath], c.wantWords, "%v", got)
		})
	}
}

func TestPoolSpecDefaults(t *testing.T) {
	assert.Equal(t, 0, PoolSpec{}.Min(), "GPU pools scale to zero")
	assert.Equal(t, 1, PoolSpec{}.Max())
	assert.Equal(t, 4, PoolSpec{NodeBounds: NodeBounds{MinNodes: ptr(4)}}.Max(), "the maximum follows a larger minimum")
}

func TestValidatePartition(t *testing.T) {
	cases := []struct {
		name      string
		partition string
		model     GPUModel
		want      string
	}{
		{"whole GPUs", "", L4, ""},
		{"a profile of the model", "1g.5gb", A100x40GB, ""},
		{"a profile of another model", "1g.10gb", A100x40GB, `"1g.5gb"`},
		{"a model without MIG", "1g.10gb", L4, "has no MIG partitions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := ValidatePartition(root.Child("partition"), c.partition, c.model)
			if c.want == "" {
				assert.Empty(t, errs)
				return
			}
			assert.Contains(t, errs.ToAggregate().Error(), c.want)
		})
	}
}

func TestTaintValidate(t *testing.T) {
	cases := []struct {
		name  string
		taint Taint
		want  string
	}{
		{"the GPU taint", GPUTaint, ""},
		{"no key", Taint{Effect: "NoSchedule"}, "taint key"},
		{"GKE's spelling of the effect", Taint{Key: "k", Effect: "NO_SCHEDULE"}, `"NoSchedule"`},
		{"a value that is no label value", Taint{Key: "k", Value: "a b", Effect: "NoExecute"}, "value"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := c.taint.Validate(field.NewPath("taint"))
			if c.want == "" {
				assert.Empty(t, errs)
				return
			}
			assert.Contains(t, errs.ToAggregate().Error(), c.want)
		})
	}
}

func TestDistinctTaintsKeepPoolOrder(t *testing.T) {
	other := Taint{Key: "gpu-tenancy.io/dedicated", Value: "l4", Effect: "NoExecute"}
	pools := []GPUPool{{Taint: GPUTaint}, {}, {Taint: other}, {Taint: GPUTaint}}
	assert.Equal(t, []Taint{GPUTaint, other}, DistinctTaints(pools))
}
func ptr[T any](v T) *T { return &v }
