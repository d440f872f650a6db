package gke

import (
	"regexp"
	"strconv"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
)

// GPUPoolSpec describes one GKE GPU node pool, as a stack's `gpuPools[]` entry spells it on GKE.
type GPUPoolSpec struct {
	cluster.PoolSpec
	// MachineType carries the GPUs: a2-highgpu-Ng carries N nvidia-tesla-a100, and so on.
	MachineType string `json:"machineType"`
	// Accelerator is the GKE accelerator type, such as nvidia-tesla-a100.
	Accelerator string `json:"accelerator"`
	// GPUCount may repeat the count the machine type carries; it cannot differ from it.
	GPUCount int `json:"gpuCount"`
}

// accelerators maps a GKE accelerator type to the GPU model it provides, the machine-type family that carries it and
// the zones that offer it. Zones: skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv (commit 006059e0); the
// authoritative list is https://cloud.google.com/compute/docs/gpus/gpu-regions-zones, and allowUnlistedZone accepts
// a zone added since.
var accelerators = map[string]accelerator{
	"nvidia-tesla-a100": {model: cluster.A100x40GB, machineFamily: "a2-highgpu", gpuCounts: []int{1, 2, 4, 8}, zones: []string{
		"asia-northeast1-a", "asia-northeast1-c", "asia-northeast3-a", "asia-northeast3-b", "asia-southeast1-a",
		"asia-southeast1-b", "asia-southeast1-c", "europe-west4-a", "europe-west4-b", "me-west1-a", "me-west1-c",
		"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f", "us-east1-b", "us-west1-b", "us-west3-b",
		"us-west4-b"}},
	"nvidia-a100-80gb": {model: cluster.A100x80GB, machineFamily: "a2-ultragpu", gpuCounts: []int{1, 2, 4, 8}, zones: []string{
		"asia-southeast1-c", "europe-west4-a", "us-central1-a", "us-central1-c", "us-east4-c", "us-east5-a", "us-east5-b"}},
	// UNCONFIRMED zone list (not in the catalog above); set allowUnlistedZone after checking gpu-regions-zones.
	"nvidia-h100-80gb": {model: cluster.H100SXM, machineFamily: "a3-highgpu", gpuCounts: []int{1, 2, 4, 8}, zones: []string{
		"us-central1-a", "us-central1-c", "us-east4-a", "us-east5-a", "europe-west4-b", "asia-northeast1-b"}},
}

type accelerator struct {
	model         cluster.GPUModel
	machineFamily string
	gpuCounts     []int
	zones         []string
}

var machineRE = regexp.MustCompile(`^([a-z0-9]+-[a-z]+)-([0-9]+)g$`)

// gpusOf is the GPU count a machine type carries (a2-highgpu-2g: 2), 0 when it names none.
func gpusOf(machineType string) int {
	m := machineRE.FindStringSubmatch(machineType)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[2])
	return n
}

// Labels a GKE GPU pool needs so that the NVIDIA DRA driver, not GKE, owns its GPUs
// (https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra).
const (
	// NoDefaultDevicePluginLabel keeps GKE's own GPU device plugin off the node; the DRA kubelet plugin must not run
	// next to a device plugin.
	NoDefaultDevicePluginLabel = "gke-no-default-nvidia-gpu-device-plugin"
	// DRADriverLabel lets the cluster autoscaler know the pool's GPUs are DRA devices, so a pool at zero nodes scales
	// up for ResourceClaims (ai-on-gke/website site/content/docs/tutorials/dynamic-resource-allocation/
	// gpu-fungibility/index.md; not in GKE's API reference: UNCONFIRMED as API).
	DRADriverLabel = "cloud.google.com/gke-nvidia-gpu-dra-driver"
)

// DriverRoot is where Google's COS driver installer puts the NVIDIA driver on the node, the DRA driver's
// nvidiaDriverRoot on GKE (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/dra-intro-install.html,
// GKE values).
const DriverRoot = "/home/kubernetes/bin/nvidia"

// PoolContract describes what a GKE GPU pool offers and how its nodes are labelled and tainted; validation and the
// cluster component both build the contract here. False when the accelerator is unknown.
func PoolContract(p GPUPoolSpec) (cluster.GPUPool, bool) {
	acc, ok := accelerators[p.Accelerator]
	if !ok {
		return cluster.GPUPool{}, false
	}
	labels := cluster.GPUNodeLabels(p.Name)
	labels[NoDefaultDevicePluginLabel] = "true"
	labels[DRADriverLabel] = "true"
	return p.Dedicate(cluster.GPUPool{
		Name:        p.Name,
		Model:       acc.model,
		GPUsPerNode: gpusOf(p.MachineType),
		MIGProfile:  p.Partition,
		MaxNodes:    p.Max(),
		Labels:      labels,
		Taint:       cluster.GPUTaint,
	}), true
}
