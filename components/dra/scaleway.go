package dra

import (
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// GPUOperatorClusterPolicy is the GPU Operator's singleton ClusterPolicy, as Kapsule's pre-installed operator names it.
const GPUOperatorClusterPolicy = "cluster-policy"

type clusterPolicySpec struct {
	DevicePlugin enabled `json:"devicePlugin"`
}

// disableGPUOperatorDevicePlugin turns off the classic device plugin of the GPU Operator that Kapsule installs on every
// GPU pool: the DRA kubelet plugin must not share a node with it
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/dra-intro-install.html). NEEDS CONFIRMATION on a real Kapsule cluster: whether Scaleway's Easy Deploy keeps this change across pool and
// cluster upgrades, and that its operator names the ClusterPolicy "cluster-policy". Destroying the patch gives up the
// field without restoring the device plugin.
func disableGPUOperatorDevicePlugin(ctx *pulumi.Context, name string, d *Driver) (*apiextensions.CustomResourcePatch, error) {
	spec, err := helmchart.Values(clusterPolicySpec{DevicePlugin: enabled{Enabled: false}})
	if err != nil {
		return nil, fmt.Errorf("encoding GPU Operator ClusterPolicy patch: %w", err)
	}
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
