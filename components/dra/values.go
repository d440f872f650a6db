package dra

import (
	"slices"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// values are the dra-driver-nvidia-gpu chart values this project sets; every other key keeps the chart default.
type values struct {
	NvidiaDriverRoot string `json:"nvidiaDriverRoot"`
	// The chart refuses to render GPU allocation without this guard (dra-driver-nvidia-gpu v0.4.0 templates/validation.yaml).
	GPUResourcesEnabledOverride bool `json:"gpuResourcesEnabledOverride"`
	// Set explicitly so rendering never depends on live .Capabilities: the chart picks it from .Capabilities.APIVersions
	// otherwise (dra-driver-nvidia-gpu v0.4.0 values.yaml resourceApiVersion, templates/validation.yaml).
	ResourceAPIVersion string              `json:"resourceApiVersion"`
	Resources          resourcesValues     `json:"resources"`
	KubeletPlugin      kubeletPluginValues `json:"kubeletPlugin"`
}

type resourcesValues struct {
	GPUs           enabled `json:"gpus"`
	ComputeDomains enabled `json:"computeDomains"`
}

type enabled struct {
	Enabled bool `json:"enabled"`
}

type kubeletPluginValues struct {
	NodeSelector map[string]string `json:"nodeSelector"`
	Tolerations  []toleration      `json:"tolerations"`
}

type toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect"`
}

// chartDefaultToleration is kubeletPlugin.tolerations[0] of the chart; a values list replaces the chart's list, so it
// is kept explicitly (dra-driver-nvidia-gpu v0.4.0 values.yaml).
var chartDefaultToleration = toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}

func (t toleration) tolerates(taint cluster.Taint) bool {
	if t.Key != taint.Key || t.Effect != taint.Effect {
		return false
	}
	return t.Operator == "Exists" || t.Value == taint.Value
}

// dedicatedToleration lets a platform DaemonSet onto the pools dedicated to any tenant.
var dedicatedToleration = toleration{Key: naming.DedicatedNodeKey, Operator: "Exists", Effect: "NoSchedule"}

// kubeletPluginTolerations lets the kubelet plugin onto every GPU pool: the chart default plus one toleration per
// pool taint it does not already cover, and every dedicated pool's taint.
func kubeletPluginTolerations(pools []cluster.GPUPool) []toleration {
	out := []toleration{chartDefaultToleration}
	for _, taint := range cluster.DistinctTaints(pools) {
		if slices.ContainsFunc(out, func(t toleration) bool { return t.tolerates(taint) }) {
			continue
		}
		t := toleration{Key: taint.Key, Operator: "Exists", Effect: taint.Effect}
		if taint.Value != "" {
			t.Operator, t.Value = "Equal", taint.Value
		}
		out = append(out, t)
	}
	if len(cluster.Dedicated(pools)) > 0 {
		out = append(out, dedicatedToleration)
	}
	return out
}

func driverValues(cfg *DriverArgs) values {
	return values{
		NvidiaDriverRoot:            cfg.DriverRoot,
		GPUResourcesEnabledOverride: true,
		ResourceAPIVersion:          ResourceAPIVersion,
		Resources: resourcesValues{
			GPUs:           enabled{Enabled: true},
			ComputeDomains: enabled{Enabled: cfg.ComputeDomains},
		},
		KubeletPlugin: kubeletPluginValues{
			// Every flavour labels its GPU pools with this; the chart's own affinity accepts it too, and GKE has no NFD
			// to set the alternatives (dra-driver-nvidia-gpu v0.4.0 values.yaml kubeletPlugin.affinity).
			NodeSelector: map[string]string{cluster.GPUPresentLabel: "true"},
			Tolerations:  kubeletPluginTolerations(cfg.GPUPools),
		},
	}
}
