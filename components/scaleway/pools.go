package scaleway

import "github.com/gpu-tenancy/gpu-tenancy/components/cluster"

// GPUPoolSpec describes one Kapsule GPU pool, as a stack's `gpuPools[]` entry spells it on Scaleway.
type GPUPoolSpec struct {
	cluster.PoolSpec
	// NodeType is the instance type, such as L4-1-24G or H100-1-80G.
	NodeType string `json:"nodeType"`
}

// nodeTypes maps a Scaleway GPU node type to its model, GPU count and zones. GPU types exist only in fr-par-2 and
// pl-waw-2, H100-SXM only in fr-par-2 (scaleway/docs-content pages/account/reference-content/products-availability.mdx);
// names from pages/gpu/reference-content/choosing-gpu-instance-type.mdx.
var nodeTypes = map[string]nodeType{
	"L4-1-24G":       {model: cluster.L4, gpus: 1, zones: gpuZones},
	"L4-2-24G":       {model: cluster.L4, gpus: 2, zones: gpuZones},
	"L4-4-24G":       {model: cluster.L4, gpus: 4, zones: gpuZones},
	"L4-8-24G":       {model: cluster.L4, gpus: 8, zones: gpuZones},
	"L40S-1-48G":     {model: cluster.L40S, gpus: 1, zones: gpuZones},
	"L40S-2-48G":     {model: cluster.L40S, gpus: 2, zones: gpuZones},
	"L40S-4-48G":     {model: cluster.L40S, gpus: 4, zones: gpuZones},
	"L40S-8-48G":     {model: cluster.L40S, gpus: 8, zones: gpuZones},
	"H100-1-80G":     {model: cluster.H100PCIe, gpus: 1, zones: gpuZones},
	"H100-2-80G":     {model: cluster.H100PCIe, gpus: 2, zones: gpuZones},
	"H100-SXM-2-80G": {model: cluster.H100SXM, gpus: 2, zones: []string{"fr-par-2"}},
	"H100-SXM-4-80G": {model: cluster.H100SXM, gpus: 4, zones: []string{"fr-par-2"}},
	"H100-SXM-8-80G": {model: cluster.H100SXM, gpus: 8, zones: []string{"fr-par-2"}},
}

var gpuZones = []string{"fr-par-2", "pl-waw-2"}

// Zones are the Kapsule availability zones (same products-availability.mdx).
var Zones = []string{"fr-par-1", "fr-par-2", "fr-par-3", "nl-ams-1", "nl-ams-2", "nl-ams-3", "pl-waw-1",
	"pl-waw-2", "pl-waw-3"}

type nodeType struct {
	model cluster.GPUModel
	gpus  int
	zones []string
}

// MIGConfigLabel asks the mig-manager of the GPU Operator, which Scaleway installs on every GPU pool, to partition the
// node's GPUs; the value names a profile set of its default config, "all-<profile>"
// (scaleway/docs-content pages/gpu/how-to/use-mig-with-kubernetes.mdx). As a pool label Scaleway keeps it applied.
const MIGConfigLabel = "nvidia.com/mig.config"

// DriverRoot is where the GPU Operator's driver container exposes the NVIDIA driver, the DRA driver's
// nvidiaDriverRoot next to the GPU Operator
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/dra-intro-install.html).
const DriverRoot = "/run/nvidia/driver"

// PoolContract describes what a Kapsule GPU pool offers and how its nodes are labelled and tainted; validation and
// the cluster component both build the contract here. False when the node type is unknown.
func PoolContract(p GPUPoolSpec) (cluster.GPUPool, bool) {
	nt, ok := nodeTypes[p.NodeType]
	if !ok {
		return cluster.GPUPool{}, false
	}
	// Not nvidia.com/dra-kubelet-plugin: the GPU Operator's driver manager flips that label during driver upgrades,
	// and Scaleway would reconcile a pool label back.
	labels := cluster.GPUNodeLabels(p.Name)
	if p.Partition != "" {
		labels[MIGConfigLabel] = "all-" + p.Partition
	}
	return p.Dedicate(cluster.GPUPool{
		Name:        p.Name,
		Model:       nt.model,
		GPUsPerNode: nt.gpus,
		MIGProfile:  p.Partition,
		MaxNodes:    p.Max(),
		Labels:      labels,
		Taint:       cluster.GPUTaint,
	}), true
}
