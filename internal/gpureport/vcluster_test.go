package gpureport

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// chartConfig is the config.yaml of the Secret vc-config-legal-ai that the vCluster chart v0.36.1
// (.tools/charts/vcluster) renders with Helm v3.18.6, the Helm of the pulumi-kubernetes provider that renders it for
// the platform, from its defaults and the platform's sync settings, with a value longer than a line, one of two lines
// and one of digits (the encoder folds, blocks and quotes them); chartPin is the vClusterConfigHash the same render
// put on the StatefulSet's pod template.
const (
	chartConfig = "testdata/vcluster-v0.36.1-config.yaml"
	chartPin    = "80cd1d698429fda4791ef6e295323edad1963d2b313f04ba3a7e72826624cf0e"
)

func TestConfigHash(t *testing.T) {
	raw, err := os.ReadFile(chartConfig)
	require.NoError(t, err)
	withAutoNodes := func(t *testing.T) []byte {
		var values map[string]any
		require.NoError(t, yaml.Unmarshal(raw, &values))
		values["privateNodes"].(map[string]any)["autoNodes"] = []any{map[string]any{"name": "pool-a"}}
		out, err := yaml.Marshal(values)
		require.NoError(t, err)
		return bytes.TrimSuffix(out, []byte("\n"))
	}
	cases := []struct {
		name string
		raw  func(t *testing.T) []byte
		want string
		err  error
	}{
		{"the chart's config hashes to the chart's pin", func(*testing.T) []byte { return raw }, chartPin, nil},
		{"privateNodes.autoNodes is left out of the hash, as the chart leaves it out", withAutoNodes, chartPin, nil},
		{"the same values written otherwise are not the chart's", func(*testing.T) []byte { return append(bytes.Clone(raw), '\n') }, "", errNotAsRendered},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.raw(t)
			var values map[string]any
			require.NoError(t, yaml.Unmarshal(in, &values))
			got, err := configHash(in, values)
			assert.ErrorIs(t, err, tc.err)
			assert.Equal(t, tc.want, got)
		})
	}
}
