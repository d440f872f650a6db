package dra

import (
	"fmt"

	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// GKEDriverInstallerURL is Google's COS NVIDIA driver installer DaemonSet, pinned to commit f2cf4197 (2025-07-02), the
// last change to the file as of repository HEAD 992db812 (2026-06-09), read from the stored mirror of
// GoogleCloudPlatform/container-engine-accelerators. GKE pools for DRA disable driver auto-install, so this DaemonSet
// installs the driver into gke.DriverRoot instead (https://cloud.google.com/kubernetes-engine/docs/how-to/set-up-dra).
const GKEDriverInstallerURL = "https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/" +
	"f2cf4197a5c3f0f20133be15d5fad8b7453beed5/nvidia-driver-installer/cos/daemonset-preloaded.yaml"

// criticalPriorityClasses are the classes the driver's pods use by default (dra-driver-nvidia-gpu v0.4.0 values.yaml).
var criticalPriorityClasses = []string{"system-node-critical", "system-cluster-critical"}

// gkePrerequisites declares the driver installer and the quota that lets critical pods run outside kube-system.
func gkePrerequisites(ctx *pulumi.Context, name string, cfg *DriverArgs, d *Driver, ns *corev1.Namespace) ([]pulumi.Resource, error) {
	installer, err := helmchart.NewConfigFile(ctx, name+"-nvidia-driver-installer", &helmchart.ConfigFileArgs{
		File: pulumi.String(GKEDriverInstallerURL),
	}, pulumi.Parent(d))
	if err != nil {
		return nil, fmt.Errorf("creating GKE NVIDIA driver installer: %w", err)
	}
	// GKE's own gcp-critical-pods quota caps these priority classes to kube-system; a quota scoped to them in the
	// driver namespace admits the driver's pods
	// (https://docs.cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute-custom-a4x).
	quota, err := corev1.NewResourceQuota(ctx, name+"-critical-pods", &corev1.ResourceQuotaArgs{
		Metadata: &metav1.ObjectMetaArgs{
			Name:      pulumi.String("dra-driver-critical-pods"),
			Namespace: ns.Metadata.Name(),
		},
		Spec: &corev1.ResourceQuotaSpecArgs{
			Hard: pulumi.StringMap{"pods": pulumi.String(fmt.Sprint(cfg.gkeQuotaPods()))},
			ScopeSelector: &corev1.ScopeSelectorArgs{
				MatchExpressions: corev1.ScopedResourceSelectorRequirementArray{
					&corev1.ScopedResourceSelectorRequirementArgs{
						ScopeName: pulumi.String("PriorityClass"),
						Operator:  pulumi.String("In"),
						Values:    pulumi.ToStringArray(criticalPriorityClasses),
					},
				},
			},
		},
	}, pulumi.Parent(d))
	if err != nil {
		return nil, fmt.Errorf("creating GKE critical-pod quota: %w", err)
	}
	return []pulumi.Resource{installer, quota}, nil
}
