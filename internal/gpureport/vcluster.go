package gpureport

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"

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
)

// ConfigHashAnnotation is the pod template annotation by which the chart's StatefulSet pins its config: the hex
// SHA-256 of the base64 of the values as YAML (the config Secret's config.yaml) without privateNodes.autoNodes
// (loft-sh/vcluster v0.36.1 chart/templates/statefulset.yaml, _vclusterconfighash.tpl).
const ConfigHashAnnotation = "vClusterConfigHash"

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

// errNotAsRendered: config.yaml is not what the chart's toYaml writes for the values it holds.
var errNotAsRendered = errors.New("config.yaml is not written as the vCluster chart writes it")

// configHash is the hash the chart pins a config with (ConfigHashAnnotation), computed from the config Secret's
// config.yaml and the values decoded from it. The chart writes config.yaml with Helm's toYaml (sigs.k8s.io/yaml
// Marshal, its trailing newline cut: helm v3.18.6 pkg/engine/funcs.go) and hashes toYaml of the same values less
// privateNodes.autoNodes; both are re-derived here from the decoded values. So config.yaml must be exactly what
// toYaml writes for them, or errNotAsRendered: otherwise two texts that decode alike here, one of them hashing to the
// pin, could be read differently by vCluster's own decoder.
func configHash(raw []byte, values map[string]any) (string, error) {
	again, err := yaml.Marshal(values)
	if err != nil {
		return "", fmt.Errorf("encoding %s: %w", ConfigSecretKey, err)
	}
	if !bytes.Equal(bytes.TrimSuffix(again, []byte("\n")), raw) {
		return "", errNotAsRendered
	}
	hashed := maps.Clone(values)
	if nodes, ok := hashed["privateNodes"].(map[string]any); ok {
		nodes = maps.Clone(nodes)
		delete(nodes, "autoNodes")
		hashed["privateNodes"] = nodes
	}
	in, err := yaml.Marshal(hashed)
	if err != nil {
		return "", fmt.Errorf("encoding %s: %w", ConfigSecretKey, err)
	}
	sum := sha256.Sum256([]byte(base64.StdEncoding.EncodeToString(bytes.TrimSuffix(in, []byte("\n")))))
	return hex.EncodeToString(sum[:]), nil
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
