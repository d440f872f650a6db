package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestProductMatchIsAWholeWord(t *testing.T) {
	cases := []struct {
		name    string
		model   GPUModel
		product string
		want    bool
	}{
		{"A100 selects the 40GB part", A100x40GB, "A100", true},
		{"case does not matter", A100x80GB, "a100", true},
		{"a longer match", A100x80GB, "A100-SXM4-80GB", true},
		{"L4 selects L4", L4, "L4", true},
		{"L4 does not select L40S", L40S, "L4", false},
		{"H100 selects the PCIe part", H100PCIe, "H100", true},
		{"A10 does not select A100", A100x40GB, "A10", false},
		{"a dot is literal", A100x40GB, "A100.SXM4", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, c.model.MatchesProduct(c.product)) })
	}
}
