package scaleway

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The cluster and its pools carry naming.CostLabels as `key=value` tags, the same keys and values as GKE's resource
// labels, so that GPU spend can be told apart by stack, pool and GPU model. On a Kapsule pool they also reach the pool's instances, and
// Scaleway's cloud controller manager copies each `key=value` tag to the nodes as the Kubernetes label
// `k8s.scaleway.com/key=value` (scaleway/scaleway-cloud-controller-manager docs/tags.md), so a value must also be a
// Kubernetes label value. Changing them replaces nothing: the provider's `tags` of a pool and of a cluster are not
// ForceNew and are sent with UpdatePoolRequest and UpdateClusterRequest (scaleway/terraform-provider-scaleway v2.76.0
// internal/services/k8s/pool.go, cluster.go, which pulumiverse/pulumi-scaleway bridges).

// validateTagValue refuses a value derived from the config key at path that the cloud controller manager could not
// copy to the nodes as the value of label key.
func validateTagValue(path *field.Path, key, value string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidLabelValue(value) {
		errs = append(errs, field.Invalid(path, value, fmt.Sprintf(
			"is the value of tag %s, which the nodes get as a Kubernetes label: %s", key, msg)))
	}
	return errs
}

// Tags writes key/value pairs as Scaleway tags, `key=value`, sorted so the order never shows as a change.
func Tags(kv map[string]string) []string {
	out := make([]string, 0, len(kv))
	for k, v := range kv {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
