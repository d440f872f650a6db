package pipeline

import "github.com/gpu-tenancy/gpu-tenancy/components/cluster"

// gkeAccelerators maps a GKE accelerator type to the GPU model it provides, the machine-type family that carries it
// (a2-highgpu-Ng carries N nvidia-tesla-a100, ...) and the zones that offer it.
var gkeAccelerators = map[string]gkeAccelerator{
	// Zones: skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv (gpu-facts 2.4); authoritative list:
	// https://cloud.google.com/compute/docs/gpus/gpu-regions-zones
	"nvidia-tesla-a100": {model: cluster.A100x40GB, machineFamily: "a2-highgpu", gpuCounts: []int{1, 2, 4, 8}, zones: []string{
		"asia-northeast1-a", "asia-northeast1-c", "asia-northeast3-a", "asia-northeast3-b", "asia-southeast1-a",
		"asia-southeast1-b", "asia-southeast1-c", "europe-west4-a", "europe-west4-b", "me-west1-a", "me-west1-c",
		"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f", "us-east1-b", "us-west1-b", "us-west3-b",
		"us-west4-b"}},
	// Same source as above.
	"nvidia-a100-80gb": {model: cluster.A100x80GB, machineFamily: "a2-ultragpu", gpuCounts: []int{1, 2, 4, 8}, zones: []string{
		"asia-southeast1-c", "europe-west4-a", "us-central1-a", "us-central1-c", "us-east4-c", "us-east5-a", "us-east5-b"}},
	// UNCONFIRMED zone list (not in the reference); set allowUnlistedZone after checking gpu-regions-zones.
	"nvidia-h100-80gb": {model: cluster.H100SXM, machineFamily: "a3-highgpu", gpuCounts: []int{1, 2, 4, 8}, zones: []string{
		"us-central1-a", "us-central1-c", "us-east4-a", "us-east5-a", "europe-west4-b", "asia-northeast1-b"}},
}

type gkeAccelerator struct {
	model         cluster.GPUModel
	machineFamily string
	gpuCounts     []int
	zones         []string
}

// scalewayNodeTypes maps a Scaleway GPU node type to its model and GPU count. GPU types exist only in fr-par-2 and
// pl-waw-2, H100-SXM only in fr-par-2: scaleway/docs-content pages/account/reference-content/products-availability.mdx;
// names: pages/gpu/reference-content/choosing-gpu-instance-type.mdx (gpu-facts 3.4).
var scalewayNodeTypes = map[string]scalewayNodeType{
	"L4-1-24G":       {model: cluster.L4, gpus: 1, zones: scwGPUZones},
	"L4-2-24G":       {model: cluster.L4, gpus: 2, zones: scwGPUZones},
	"L4-4-24G":       {model: cluster.L4, gpus: 4, zones: scwGPUZones},
	"L4-8-24G":       {model: cluster.L4, gpus: 8, zones: scwGPUZones},
	"L40S-1-48G":     {model: cluster.L40S, gpus: 1, zones: scwGPUZones},
	"L40S-2-48G":     {model: cluster.L40S, gpus: 2, zones: scwGPUZones},
	"L40S-4-48G":     {model: cluster.L40S, gpus: 4, zones: scwGPUZones},
	"L40S-8-48G":     {model: cluster.L40S, gpus: 8, zones: scwGPUZones},
	"H100-1-80G":     {model: cluster.H100PCIe, gpus: 1, zones: scwGPUZones},
	"H100-2-80G":     {model: cluster.H100PCIe, gpus: 2, zones: scwGPUZones},
	"H100-SXM-2-80G": {model: cluster.H100SXM, gpus: 2, zones: []string{"fr-par-2"}},
	"H100-SXM-4-80G": {model: cluster.H100SXM, gpus: 4, zones: []string{"fr-par-2"}},
	"H100-SXM-8-80G": {model: cluster.H100SXM, gpus: 8, zones: []string{"fr-par-2"}},
}

var scwGPUZones = []string{"fr-par-2", "pl-waw-2"}

// scalewayZones are the Kapsule availability zones (all nine AZs; gpu-facts 3.4).
var scalewayZones = []string{"fr-par-1", "fr-par-2", "fr-par-3", "nl-ams-1", "nl-ams-2", "nl-ams-3", "pl-waw-1",
	"pl-waw-2", "pl-waw-3"}

type scalewayNodeType struct {
	model cluster.GPUModel
	gpus  int
	zones []string
}

// driverClasses are the DeviceClasses the NVIDIA DRA driver chart creates itself; a tenant class must not shadow
// them (dra-driver-nvidia-gpu 0.4.0 templates/deviceclass-*.yaml, docs/install.md).
var driverClasses = []string{"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com",
	"compute-domain-daemon.nvidia.com", "compute-domain-default-channel.nvidia.com"}
