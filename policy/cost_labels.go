package main

import (
	"fmt"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// The cost labels (components/naming cost.go) say which stack, pool and GPU model a cloud resource's cost belongs to.
// A GKE cluster's resourceLabels and a pool's nodeConfig.resourceLabels land on the cloud resources they cover and so
// on their billing rows (https://cloud.google.com/kubernetes-engine/docs/how-to/creating-managing-labels), and cost
// allocation (costManagementConfig.enabled) adds rows per namespace
// (https://cloud.google.com/kubernetes-engine/docs/how-to/cost-allocations); Kapsule carries tags on clusters and
// pools (pulumi-scaleway sdk v1.53.0 go/scaleway/kubernetes/{cluster,pool}.go Tags), written key=value.

// checkCostLabels (advisory): cloud clusters and pools carry the cost labels, and GKE clusters have cost allocation on.
func checkCostLabels(r resource) []violation {
	var problems []string
	var what string
	switch r.Type {
	case gkeClusterType:
		what = "GKE cluster " + r.Name
		problems = missingLabelKeys(r, []string{"resourceLabels"}, naming.CostStackKey)
		if enabled, known := lookup(r.Props, "costManagementConfig", "enabled"); known && !(enabled.IsBool() && enabled.AsBool()) {
			problems = append(problems, "costManagementConfig.enabled is not true: turn on GKE cost allocation "+
				"(ClusterArgs.CostManagementConfig{Enabled: true}), or the billing export has no per-namespace rows")
		}
	case gkeNodePoolType:
		what = "GKE node pool " + r.Name
		keys := []string{naming.CostStackKey, naming.CostPoolKey}
		if gpu, known := isGKEGPUPool(r); gpu && known {
			keys = append(keys, naming.CostGPUModelKey)
		}
		problems = missingLabelKeys(r, []string{"nodeConfig", "resourceLabels"}, keys...)
	case kapsuleClusterType:
		what = "Kapsule cluster " + r.Name
		problems = missingTags(r, naming.CostStackKey)
	case kapsulePoolType:
		what = "Kapsule pool " + r.Name
		keys := []string{naming.CostStackKey, naming.CostPoolKey}
		if gpu, known := isKapsuleGPUPool(r); gpu && known {
			keys = append(keys, naming.CostGPUModelKey)
		}
		problems = missingTags(r, keys...)
	default:
		return nil
	}
	if len(problems) == 0 {
		return nil
	}
	return []violation{{URN: r.URN, Message: fmt.Sprintf("%s cannot be told apart in the cloud bill: %s",
		what, strings.Join(problems, "; "))}}
}

// missingLabelKeys lists the keys absent from the label map at path; nothing while the map is unknown.
func missingLabelKeys(r resource, path []string, keys ...string) []string {
	labels, known := lookup(r.Props, path...)
	if !known {
		return nil
	}
	m := entries(labels)
	var missing []string
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s lacks %s: add %s", strings.Join(path, "."),
		strings.Join(missing, ", "), labelHint(missing, ": "))}
}

// missingTags lists the key=value tags absent from a Kapsule resource's tags; nothing while a tag that could be one of
// them is unknown.
func missingTags(r resource, keys ...string) []string {
	tags, known := lookup(r.Props, "tags")
	if !known {
		return nil
	}
	var missing []string
	for _, k := range keys {
		found := absent
		for _, t := range elements(tags) {
			if t.IsComputed() {
				found = strongest(found, unknowable)
				continue
			}
			if v, ok := strings.CutPrefix(stringOr(t, ""), k+"="); ok && v != "" {
				found = present
			}
		}
		if found == absent {
			missing = append(missing, k)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("tags lack %s: add %s", strings.Join(missing, ", "), labelHint(missing, "="))}
}

// labelHint writes the labels to add, with placeholders for their values.
func labelHint(keys []string, sep string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + sep + "<" + strings.TrimPrefix(k, "gpu-tenancy-") + ">"
	}
	return strings.Join(parts, ", ")
}
