package cluster

import "github.com/gpu-tenancy/gpu-tenancy/components/naming"

// The platform pool. Given a pool for the tenants' pods that need no GPU (gke.tenantPool, scaleway.tenantPool; on an
// existing cluster, nodes the operator labels and taints: existing.platformPool), the system pool becomes the
// platform's own: its nodes carry PlatformPoolTaint and PlatformPoolLabels, the platform's own pods (vCluster
// Platform, the DRA driver's controller, kube-state-metrics) tolerate the one and select the other, and no pod in a
// tenant's namespace may tolerate it: the tenants' placement policy admits only the taints admission.tolerableTaints
// lists, which may not name it, and no pod bound to a node by name. A vCluster's control plane is not among them: its
// tenant holds it (exec into it, patch its StatefulSet's template), so it runs with the tenants' pods. A tenant's pod
// that breaks out of its container is then among tenants' pods, not beside the platform's controllers and their
// credentials (docs/threat-model.md, "Cloud identity and node services").

// PlatformPoolTaint keeps every pod but the platform's own off the platform pool.
var PlatformPoolTaint = Taint{Key: naming.PlatformPoolKey, Value: "true", Effect: "NoSchedule"}

// SystemPoolNodes are the labels and taints of a cloud cluster's system pool's nodes: PlatformPoolLabels and
// PlatformPoolTaint when it is the platform's own, none otherwise.
func SystemPoolNodes(platformPool bool) (map[string]string, []Taint) {
	if !platformPool {
		return nil, nil
	}
	return PlatformPoolLabels(), []Taint{PlatformPoolTaint}
}

// PlatformPoolLabels are the labels of the platform pool's nodes.
func PlatformPoolLabels() map[string]string { return map[string]string{naming.PlatformPoolKey: "true"} }

// Placement is where a pod may go: the node labels it selects and the taints it tolerates. The zero value leaves it
// to the scheduler.
type Placement struct {
	NodeSelector map[string]string
	Tolerations  []Taint
}

// PlatformPlacement places the platform's own pods on the platform pool when the cluster has one, else anywhere.
func (c *Cluster) PlatformPlacement() Placement {
	if !c.PlatformPool {
		return Placement{}
	}
	return Placement{NodeSelector: PlatformPoolLabels(), Tolerations: []Taint{PlatformPoolTaint}}
}

// Toleration is a pod's toleration in the pod spec's own shape, as charts take it in their values.
type Toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value,omitempty"`
	Effect   string `json:"effect,omitempty"`
}

// TolerationValues are the placement's tolerations in the pod spec's shape: each taint tolerated by key and value,
// whatever its effect, so nodes an operator taints NoExecute keep the platform's pods.
func (p Placement) TolerationValues() []Toleration {
	var out []Toleration
	for _, t := range p.Tolerations {
		out = append(out, Toleration{Key: t.Key, Operator: "Equal", Value: t.Value})
	}
	return out
}
