package e2e

import (
	"context"
	"slices"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSimulatedHardwareAppliesAndRemoves runs after the stack test: the simulated nodes are schedulable GPU nodes
// with slices owned by their node, and Remove takes them away again.
func TestSimulatedHardwareAppliesAndRemoves(t *testing.T) {
	ctx := context.Background()
	hw, err := simhw.Load()
	require.NoError(t, err)

	require.NoError(t, simhw.Apply(ctx, client))
	require.NoError(t, simhw.Apply(ctx, client), "a second Apply is harmless")
	for _, want := range hw.Nodes {
		n, err := client.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, want.Spec.Taints, n.Spec.Taints, "node %s: not-ready taint lifted, GPU taint kept", n.Name)
		assert.True(t, slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}), "node %s Ready", n.Name)
	}
	for _, want := range hw.Slices {
		s, err := client.ResourceV1().ResourceSlices().Get(ctx, want.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Len(t, s.Spec.Devices, len(want.Spec.Devices), "slice %s", s.Name)
		require.Len(t, s.OwnerReferences, 1, "slice %s", s.Name)
		assert.Equal(t, "Node/"+*want.Spec.NodeName, s.OwnerReferences[0].Kind+"/"+s.OwnerReferences[0].Name)
	}

	require.NoError(t, simhw.Remove(ctx, client))
	require.NoError(t, simhw.Remove(ctx, client), "a second Remove is harmless")
	for _, want := range hw.Nodes {
		_, err := client.CoreV1().Nodes().Get(ctx, want.Name, metav1.GetOptions{})
		assert.Error(t, err, "node %s removed", want.Name)
	}
	for _, want := range hw.Slices {
		_, err := client.ResourceV1().ResourceSlices().Get(ctx, want.Name, metav1.GetOptions{})
		assert.Error(t, err, "slice %s removed", want.Name)
	}
}
