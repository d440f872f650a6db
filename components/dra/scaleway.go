package dra

import (
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// GPUOperatorClusterPolicy is the GPU Operator's singleton ClusterPolicy, as Kapsule's pre-installed operator names it.
const GPUOperatorClusterPolicy = "cluster-policy"

type clusterPolicySpec struct {
	DevicePlugin enabled       `json:"devicePlugin"`
	CDI          enabled       `json:"cdi"`
	Toolkit      toolkitValues `json:"toolkit"`
	// DaemonSets is set only when a pool is dedicated to a tenant, so that the operator's driver, toolkit and
	// validator run on its nodes too.
	DaemonSets *daemonSetsValues `json:"daemonsets,omitempty"`
}

// daemonSetsValues are the tolerations of every DaemonSet of the GPU Operator (NVIDIA/gpu-operator
// api/nvidia/v1/clusterpolicy_types.go DaemonsetsSpec). The list is applied whole, so it repeats the chart's own
// default, the GPU taint (deployments/gpu-operator/values.yaml daemonsets.tolerations).
type daemonSetsValues struct {
	Tolerations []cluster.Toleration `json:"tolerations"`
}

type toolkitValues struct {
	Env []envVar `json:"env"`
}

type envVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// toolkitEnv keeps the NVIDIA runtime away from unprivileged containers' own requests. A CUDA image sets
// NVIDIA_VISIBLE_DEVICES=all in its ENV, where admission cannot see it; a container under the NVIDIA runtime would get
// every GPU of the node. So the toolkit ignores device requests by variable and by volume mount from unprivileged
// containers, and the NVIDIA runtime is never the node's default, which GPU Operator v25.3 leaves it even with CDI on
// (NVIDIA/nvidia-container-toolkit v1.20.2 cmd/nvidia-ctk-installer/toolkit/toolkit.go and
// container/runtime/runtime.go defaults; NVIDIA/gpu-operator v25.10.1 controllers/object_controls.go
// transformToolkitCtrForCDI; https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/security.html). The
// operator's own operands are privileged, which these settings leave alone, and with CDI on its device plugin and
// validator get GPUs through CDI, not the variable.
var toolkitEnv = []envVar{
	{"ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "false"},
	{"ACCEPT_NVIDIA_VISIBLE_DEVICES_AS_VOLUME_MOUNTS", "false"},
	{"NVIDIA_RUNTIME_SET_AS_DEFAULT", "false"},
}

// configureGPUOperator turns off the classic device plugin of the GPU Operator that Kapsule installs on every GPU pool
// (the DRA kubelet plugin must not share a node with it:
// https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/dra-intro-install.html), and sets its container
// toolkit as toolkitEnv says, with CDI on. NEEDS CONFIRMATION on a real Kapsule cluster: whether Scaleway's Easy Deploy
// keeps this change across pool and cluster upgrades, that its operator names the ClusterPolicy "cluster-policy", and
// that Scaleway sets no toolkit.env entries of its own: server-side apply of a list without merge keys replaces it
// whole. Destroying the patch gives up the fields without restoring what was there.
func configureGPUOperator(ctx *pulumi.Context, name string, d *Driver, pools []cluster.GPUPool) (*apiextensions.CustomResourcePatch, error) {
	policy := clusterPolicySpec{DevicePlugin: enabled{Enabled: false}, CDI: enabled{Enabled: true}, Toolkit: toolkitValues{Env: toolkitEnv}}
	if len(cluster.Dedicated(pools)) > 0 {
		policy.DaemonSets = &daemonSetsValues{Tolerations: []cluster.Toleration{chartDefaultToleration, dedicatedToleration}}
	}
	spec, err := helmchart.Values(policy)
	if err != nil {
		return nil, fmt.Errorf("encoding GPU Operator ClusterPolicy patch: %w", err)
	}
	// The resource keeps the name it had when it only turned the device plugin off, so existing stacks update it.
	patch, err := apiextensions.NewCustomResourcePatch(ctx, name+"-gpu-operator-device-plugin-off", &apiextensions.CustomResourcePatchArgs{
		ApiVersion: pulumi.String("nvidia.com/v1"),
		Kind:       pulumi.String("ClusterPolicy"),
		Metadata: &metav1.ObjectMetaArgs{
			Name: pulumi.String(GPUOperatorClusterPolicy),
			// The field belongs to the operator's Helm release; server-side apply must take it over.
			Annotations: pulumi.StringMap{"pulumi.com/patchForce": pulumi.String("true")},
		},
		OtherFields: kubernetes.UntypedArgs{"spec": spec},
	}, pulumi.Parent(d))
	if err != nil {
		return nil, fmt.Errorf("creating GPU Operator ClusterPolicy patch: %w", err)
	}
	return patch, nil
}
