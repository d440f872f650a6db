package gke

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The cluster and its node pools carry naming.CostLabels as resource labels, so that the Cloud Billing export can
// break GPU spend down by stack, pool and GPU model. GKE cost allocation adds the workloads' namespaces and Kubernetes labels on top
// (https://cloud.google.com/kubernetes-engine/docs/how-to/cost-allocations). Changing them replaces nothing: pulumi-gcp
// bridges the Terraform Google provider, whose node pool `node_config.resource_labels` is not ForceNew and is sent
// with UpdateNodePoolRequest, and whose cluster `resource_labels` and `cost_management_config` are updated in place
// (SetLabelsRequest, UpdateClusterRequest) (hashicorp/terraform-provider-google v6.49.0
// google/services/container/node_config.go nodePoolNodeConfigUpdate, resource_container_cluster.go).

// maxLabelValue is GCP's limit on a label value's length.
const maxLabelValue = 63

var (
	// labelValueRE is what GCP accepts as a label value: lowercase letters, digits, underscores and dashes, at most 63
	// characters (https://cloud.google.com/compute/docs/labeling-resources#requirements; international characters,
	// also allowed there, are never produced here).
	labelValueRE = regexp.MustCompile(`^[a-z0-9_-]{0,63}$`)
)

// validateLabelValue refuses a value derived from the config key at path that GCP would not take as the value of
// label key.
func validateLabelValue(path *field.Path, key, value string) field.ErrorList {
	if labelValueRE.MatchString(value) {
		return nil
	}
	return field.ErrorList{field.Invalid(path, value, fmt.Sprintf(
		"is the value of GCP label %s, which takes at most %d lowercase letters, digits, '_' or '-'", key, maxLabelValue))}
}
