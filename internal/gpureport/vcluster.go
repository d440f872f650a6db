package gpureport

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Where the vCluster chart stores a vCluster's effective config on the host: Secret vc-config-<release> in the
// release's namespace, labelled app=vcluster and release=<release>, whose key config.yaml holds the chart's values
// (its defaults coalesced with the user's) as YAML (loft-sh/vcluster v0.36.1 chart/templates/config-secret.yaml).
// components/vcluster spells the same names for the program; they are repeated here because importing that package
// would link the Pulumi SDKs into the CLI.
const (
	ConfigSecretPrefix = "vc-config-"
	ConfigSecretKey    = "config.yaml"
	vclusterAppLabel   = "app"
	vclusterApp        = "vcluster"
)

// VClusterSecretSelector selects the Secrets the vCluster chart labels as its own, the config Secrets among them.
const VClusterSecretSelector = vclusterAppLabel + "=" + vclusterApp

// decodeConfig reads a vCluster's values from its config Secret. The API server returns Secret data already
// base64-decoded, so config.yaml is plain YAML.
func decodeConfig(s *corev1.Secret) (map[string]any, error) {
	raw, ok := s.Data[ConfigSecretKey]
	if !ok {
		return nil, fmt.Errorf("it has no key %s", ConfigSecretKey)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", ConfigSecretKey, err)
	}
	return values, nil
}

// lookup follows a path of map keys.
func lookup(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
