package main

import (
	"fmt"
	"strings"
)

// Type tokens of the cloud resources the pack reads (pulumi-gcp sdk v8.41.1 go/gcp/container/{cluster,nodePool}.go,
// pulumi-scaleway sdk v1.53.0 go/scaleway/kubernetes/{cluster,pool}.go).
const (
	gkeClusterType     = "gcp:container/cluster:Cluster"
	gkeNodePoolType    = "gcp:container/nodePool:NodePool"
	kapsuleClusterType = "scaleway:kubernetes/cluster:Cluster"
	kapsulePoolType    = "scaleway:kubernetes/pool:Pool"
)

// The GPU taint every GPU pool carries, so only pods that tolerate it land on GPU nodes: the NVIDIA DRA driver's
// kubelet plugin tolerates it by default (dra-driver-nvidia-gpu v0.4.0 values.yaml, see components/dra/values.go) and
// each tenant's vCluster adds the toleration to the pods it syncs (components/vcluster). Without it, any pod, a
// tenant's CPU pods included, can be scheduled onto an expensive GPU node. The key and value are the project's
// cluster.GPUTaint (components/cluster/gpus.go); GKE spells the effect NO_SCHEDULE (pulumi-gcp sdk v8
// NodePoolNodeConfigTaint), Kapsule and Kubernetes NoSchedule.
const (
	gpuTaintKey          = "nvidia.com/gpu"
	gpuTaintValue        = "present"
	gkeNoSchedule        = "NO_SCHEDULE"
	kubernetesNoSchedule = "NoSchedule"
)

// scalewayGPUTypePrefixes start the names of Scaleway's GPU instance types: the ones the project offers (L4-*,
// L40S-*, H100-*, H100-SXM-*; components/scaleway/pools.go) and Scaleway's other GPU families (GPU-3070-S, RENDER-S,
// B300-SXM-*: https://www.scaleway.com/en/pricing/gpu/).
// A pool of any of them is a GPU pool, whether or not the project's catalog knows the type.
var scalewayGPUTypePrefixes = []string{"L4-", "L40S-", "H100-", "H100-SXM-", "GPU-", "RENDER-", "B300-"}

// isScalewayGPUType reports whether a Kapsule node type is a GPU type. The name is normalised (upper case, '_' read
// as '-') so that no other spelling of a GPU type slips past.
func isScalewayGPUType(nodeType string) bool {
	n := strings.ReplaceAll(strings.ToUpper(nodeType), "_", "-")
	for _, p := range scalewayGPUTypePrefixes {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// isGKEGPUPool reports whether a GKE node pool has GPUs (a non-empty nodeConfig.guestAccelerators), and whether that
// is known.
func isGKEGPUPool(r resource) (gpu, known bool) {
	accelerators, known := lookup(r.Props, "nodeConfig", "guestAccelerators")
	return len(elements(accelerators)) > 0, known
}

// isKapsuleGPUPool reports whether a Kapsule pool has a GPU node type, and whether that is known.
func isKapsuleGPUPool(r resource) (gpu, known bool) {
	v, known := lookup(r.Props, "nodeType")
	nodeType, _ := str(v)
	return isScalewayGPUType(nodeType), known
}

// checkGPUPoolTaint: a GPU node pool carries the GPU taint with effect NoSchedule (GKE: nodeConfig.taints with
// NO_SCHEDULE; Kapsule: taints with NoSchedule).
func checkGPUPoolTaint(r resource) []violation {
	var gpu, known bool
	var taintsPath []string
	var effect, what string
	switch r.Type {
	case gkeNodePoolType:
		gpu, known = isGKEGPUPool(r)
		taintsPath, effect, what = []string{"nodeConfig", "taints"}, gkeNoSchedule, "GKE node pool"
	case kapsulePoolType:
		gpu, known = isKapsuleGPUPool(r)
		taintsPath, effect, what = []string{"taints"}, kubernetesNoSchedule, "Kapsule pool"
	default:
		return nil
	}
	if !known || !gpu {
		return nil
	}
	taints, known := lookup(r.Props, taintsPath...)
	if !known || findTaint(taints, gpuTaintKey, "", effect) != absent {
		return nil
	}
	field := strings.Join(taintsPath, ".")
	found := "it has none"
	if len(elements(taints)) > 0 || taints.Secret() {
		found = "it has " + show(taints)
	}
	return []violation{{URN: r.URN, Message: fmt.Sprintf(
		"%s %s has GPUs but no taint %s with effect %s in %s (%s), so any pod, a tenant's CPU pods included, can "+
			"land on its GPU nodes: add {key: %q, value: %q, effect: %q} to %s (the pool contract's GPU taint, "+
			"cluster.GPUTaint)",
		what, r.Name, gpuTaintKey, effect, field, found, gpuTaintKey, gpuTaintValue, effect, field)}}
}

// dedicatedKey is the label and taint of a pool dedicated to one tenant (naming.DedicatedNodeKey,
// components/naming/naming.go): the label draws that tenant's pods (its vCluster selects it), the NoSchedule taint keeps
// every other tenant's off, since only that tenant's pods may tolerate it (components/tenancy podPlacementPolicy).
const dedicatedKey = "gpu-tenancy.io/dedicated"

// checkDedicatedPoolTaint: a node pool labelled as one tenant's carries that tenant's taint with effect NoSchedule
// (GKE: nodeConfig.labels and nodeConfig.taints with NO_SCHEDULE; Kapsule: labels and taints with NoSchedule). The
// label without the taint draws the tenant's pods onto nodes every other tenant may use too, next to its images.
func checkDedicatedPoolTaint(r resource) []violation {
	p, ok := labelledWithoutTaint(r, dedicatedKey)
	if !ok {
		return nil
	}
	return []violation{{URN: r.URN, Message: fmt.Sprintf(
		"%s %s is labelled %s=%s, the pool of tenant %s alone, but has no taint %s=%s with effect %s in %s, so every "+
			"tenant's pods can be scheduled on it, next to that tenant's images: add {key: %q, value: %q, effect: %q} "+
			"to %s (cluster.DedicatedTaint)",
		p.what, r.Name, dedicatedKey, p.value, p.value, dedicatedKey, p.value, p.effect, p.field, dedicatedKey, p.value, p.effect, p.field)}}
}

// platformPoolKey is the label and taint of the platform's own pool (naming.PlatformPoolKey,
// components/naming/naming.go): the label draws the platform's controllers, the NoSchedule taint keeps every tenant's
// pods off, since none may tolerate it (components/tenancy podPlacementPolicy).
const platformPoolKey = "gpu-tenancy.io/platform-pool"

// checkPlatformPoolTaint: a node pool labelled as the platform's own carries its taint with effect NoSchedule. The
// label without the taint draws the platform's controllers onto nodes where tenants' pods run too.
func checkPlatformPoolTaint(r resource) []violation {
	p, ok := labelledWithoutTaint(r, platformPoolKey)
	if !ok {
		return nil
	}
	return []violation{{URN: r.URN, Message: fmt.Sprintf(
		"%s %s is labelled %s=%s, the platform's own pool, but has no taint %s=%s with effect %s in %s, so tenants' "+
			"pods can be scheduled on it, beside the platform's controllers: add {key: %q, value: %q, effect: %q} to %s "+
			"(cluster.PlatformPoolTaint)",
		p.what, r.Name, platformPoolKey, p.value, platformPoolKey, p.value, p.effect, p.field, platformPoolKey, p.value, p.effect, p.field)}}
}

// labelledPool is what labelledWithoutTaint found of a pool: what it is, its label's value, and the effect and field
// its taint belongs in, in its cloud's spelling.
type labelledPool struct{ what, value, effect, field string }

// labelledWithoutTaint reports a GKE or Kapsule pool labelled key=<value> without the NoSchedule taint key=<value>;
// not when its labels or taints are not known yet.
func labelledWithoutTaint(r resource, key string) (labelledPool, bool) {
	var labelsPath, taintsPath []string
	var p labelledPool
	switch r.Type {
	case gkeNodePoolType:
		labelsPath, taintsPath, p.effect, p.what = []string{"nodeConfig", "labels"}, []string{"nodeConfig", "taints"}, gkeNoSchedule, "GKE node pool"
	case kapsulePoolType:
		labelsPath, taintsPath, p.effect, p.what = []string{"labels"}, []string{"taints"}, kubernetesNoSchedule, "Kapsule pool"
	default:
		return p, false
	}
	labels, known := lookup(r.Props, labelsPath...)
	value, labelled := str(entries(labels)[key])
	if !known || !labelled {
		return p, false
	}
	taints, known := lookup(r.Props, taintsPath...)
	if !known || findTaint(taints, key, value, p.effect) != absent {
		return p, false
	}
	p.value, p.field = value, strings.Join(taintsPath, ".")
	return p, true
}
