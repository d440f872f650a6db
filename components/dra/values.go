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
	ResourceAPIVersion string          `json:"resourceApiVersion"`
	Resources          resourcesValues `json:"resources"`
	KubeletPlugin      placementValues `json:"kubeletPlugin"`
	// Controller is set only to place the controller on the platform pool; the chart's own settings stay otherwise.
	Controller *placementValues `json:"controller,omitempty"`
}

type resourcesValues struct {
	GPUs           enabled `json:"gpus"`
	ComputeDomains enabled `json:"computeDomains"`
}

type enabled struct {
	Enabled bool `json:"enabled"`
}

// placementValues place one of the chart's workloads: the kubelet plugin, or the controller.
type placementValues struct {
	NodeSelector map[string]string    `json:"nodeSelector"`
	Tolerations  []cluster.Toleration `json:"tolerations"`
}

// chartDefaultToleration is kubeletPlugin.tolerations[0] of the chart; a values list replaces the chart's list, so it
// is kept explicitly (dra-driver-nvidia-gpu v0.4.0 values.yaml).
var chartDefaultToleration = cluster.Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}

// tolerates reports whether t tolerates taint.
func tolerates(t cluster.Toleration, taint cluster.Taint) bool {
	if t.Key != taint.Key || t.Effect != taint.Effect {
		return false
	}
	return t.Operator == "Exists" || t.Value == taint.Value
}

// dedicatedToleration lets a platform DaemonSet onto the pools dedicated to any tenant.
var dedicatedToleration = cluster.Toleration{Key: naming.DedicatedNodeKey, Operator: "Exists", Effect: "NoSchedule"}

// kubeletPluginTolerations lets the kubelet plugin onto every GPU pool: the chart default plus one toleration per
// pool taint it does not already cover, and every dedicated pool's taint.
func kubeletPluginTolerations(pools []cluster.GPUPool) []cluster.Toleration {
	out := []cluster.Toleration{chartDefaultToleration}
	for _, taint := range cluster.DistinctTaints(pools) {
		if slices.ContainsFunc(out, func(t cluster.Toleration) bool { return tolerates(t, taint) }) {
			continue
		}
		t := cluster.Toleration{Key: taint.Key, Operator: "Exists", Effect: taint.Effect}
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

// chartControllerTolerations are controller.tolerations of the chart, kept when the platform pool's is added since a
// values list replaces the chart's (dra-driver-nvidia-gpu v0.4.0 values.yaml).
var chartControllerTolerations = []cluster.Toleration{
	{Key: "node-role.kubernetes.io/control-plane", Operator: "Exists", Effect: "NoSchedule"},
	{Key: "node-role.kubernetes.io/master", Operator: "Exists", Effect: "NoSchedule"},
	{Key: "CriticalAddonsOnly", Operator: "Exists"},
}

// controllerValues place the ComputeDomain controller (a Deployment; the kubelet plugin is a DaemonSet on the GPU
// nodes) on the platform pool, or leave the chart's settings when the cluster has none.
func controllerValues(p cluster.Placement) *placementValues {
	if len(p.NodeSelector) == 0 && len(p.Tolerations) == 0 {
		return nil
	}
	return &placementValues{NodeSelector: p.NodeSelector,
		Tolerations: append(slices.Clone(chartControllerTolerations), p.TolerationValues()...)}
}

func driverValues(cfg *DriverArgs) values {
	return values{
		Controller:                  controllerValues(cfg.Controller),
		NvidiaDriverRoot:            cfg.DriverRoot,
		GPUResourcesEnabledOverride: true,
		ResourceAPIVersion:          ResourceAPIVersion,
		Resources: resourcesValues{
			GPUs:           enabled{Enabled: true},
			ComputeDomains: enabled{Enabled: cfg.ComputeDomains},
		},
		KubeletPlugin: placementValues{
			// Every flavour labels its GPU pools with this; the chart's own affinity accepts it too, and GKE has no NFD
			// to set the alternatives (dra-driver-nvidia-gpu v0.4.0 values.yaml kubeletPlugin.affinity).
			NodeSelector: map[string]string{cluster.GPUPresentLabel: "true"},
			Tolerations:  kubeletPluginTolerations(cfg.GPUPools),
		},
	}
}
