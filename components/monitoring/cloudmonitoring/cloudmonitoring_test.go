package cloudmonitoring

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring"
)

func TestGCPText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"tenant {{ $labels.tenant }}", "tenant ${metric.label.tenant}"},
		{"{{$labels.class}} of {{  $labels.namespace  }}", "${metric.label.class} of ${metric.label.namespace}"},
		{"no labels", "no labels"},
	} {
		t.Run(tc.in, func(t *testing.T) { assert.Equal(t, tc.want, gcpText(tc.in)) })
	}
}

func TestImportingRegistersTheAlertPolicies(t *testing.T) {
	assert.True(t, monitoring.AlertPoliciesRegistered())
}
