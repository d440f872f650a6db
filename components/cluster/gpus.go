package cluster

import (
	"regexp"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// GPUModel is one GPU model as the NVIDIA DRA driver publishes it.
type GPUModel struct {
	// Key is the short name used in config and messages.
	Key string
	// ProductName is the driver's `productName` attribute for the model.
	ProductName string
	// MIGProfiles are the MIG profiles the model can be partitioned into; empty when it has no MIG.
	MIGProfiles []string
}

// Product names: A100 40/80GB as the DRA driver publishes them on GKE (ai-on-gke/website
// site/content/docs/tutorials/dynamic-resource-allocation/gpu-fungibility/index.md; NVIDIA/k8s-dra-driver-gpu
// docs/install.md sample output). H100/L4/L40S strings follow nvidia-smi naming and are UNCONFIRMED on DRA.
// MIG profiles: GoogleCloudPlatform/container-engine-accelerators partition_gpu/partition_gpu.go and
// https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html.
var (
	A100x40GB = GPUModel{Key: "a100-40gb", ProductName: "NVIDIA A100-SXM4-40GB",
		MIGProfiles: []string{"1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}}
	A100x80GB = GPUModel{Key: "a100-80gb", ProductName: "NVIDIA A100-SXM4-80GB",
		MIGProfiles: []string{"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}}
	H100SXM = GPUModel{Key: "h100-80gb", ProductName: "NVIDIA H100 80GB HBM3",
		MIGProfiles: []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}}
	H100PCIe = GPUModel{Key: "h100-pcie-80gb", ProductName: "NVIDIA H100 PCIe",
		MIGProfiles: []string{"1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}}
	L4   = GPUModel{Key: "l4", ProductName: "NVIDIA L4"}
	L40S = GPUModel{Key: "l40s", ProductName: "NVIDIA L40S"}
)

// GPUModels lists every model the project knows, for lookups by key.
var GPUModels = []GPUModel{A100x40GB, A100x80GB, H100SXM, H100PCIe, L4, L40S}

// ModelKeys lists the known models' keys, for messages.
func ModelKeys() []string {
	keys := make([]string, len(GPUModels))
	for i, m := range GPUModels {
		keys[i] = m.Key
	}
	return keys
}

// ModelByKey finds a model by its Key.
func ModelByKey(key string) (GPUModel, bool) {
	for _, m := range GPUModels {
		if m.Key == key {
			return m, true
		}
	}
	return GPUModel{}, false
}

// HasMIGProfile reports whether the model can be partitioned into profile.
func (m GPUModel) HasMIGProfile(profile string) bool {
	for _, p := range m.MIGProfiles {
		if p == profile {
			return true
		}
	}
	return false
}

// MatchesProduct reports whether a class's product match (such as "A100") selects this model; the DeviceClass CEL
// applies the same ProductPattern to the driver's productName.
func (m GPUModel) MatchesProduct(product string) bool {
	return regexp.MustCompile(ProductPattern(product)).MatchString(strings.ToLower(m.ProductName))
}

// ProductPattern is the RE2 pattern a lower-cased productName must match for a product match: the product as a
// whole word, case-insensitive, so "L4" selects "NVIDIA L4" but not "NVIDIA L40S", and "A100" selects
// "NVIDIA A100-SXM4-40GB".
func ProductPattern(product string) string {
	return `(^|[^a-z0-9])` + regexp.QuoteMeta(strings.ToLower(product)) + `([^a-z0-9]|$)`
}

// Node labels and taint shared by every flavour's GPU pools.
const (
	// PoolLabel names the GPU pool a node belongs to.
	PoolLabel = naming.PoolLabel
	// GPUPresentLabel is one of the labels the DRA driver's kubelet plugin affinity accepts; GKE has no NFD to set
	// it (dra-driver-nvidia-gpu 0.4.0 values.yaml kubeletPlugin.affinity).
	GPUPresentLabel = "nvidia.com/gpu.present"
)

// GPUTaint keeps non-GPU workloads off GPU nodes; GKE sets the same taint on GPU nodes itself
// (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus).
var GPUTaint = Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}

// GPUNodeLabels are the labels every flavour puts on a GPU pool's nodes.
func GPUNodeLabels(pool string) map[string]string {
	return map[string]string{PoolLabel: pool, GPUPresentLabel: "true"}
}
