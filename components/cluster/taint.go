package cluster

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Taint is a node taint in Kubernetes casing (NoSchedule), as pods must tolerate it.
type Taint struct {
	Key    string
	Value  string
	Effect string
}

// TaintEffects are the effects Kubernetes knows (k8s.io/api v0.34.4 core/v1/types.go TaintEffect); each cloud maps
// them to its own spelling.
var TaintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// Validate checks the taint as the API server checks a node's taints: a qualified key, a label value and a known
// effect.
func (t Taint) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key == "" {
		errs = append(errs, field.Required(path.Child("key"), "a taint key such as nvidia.com/gpu"))
	}
	for _, msg := range validation.IsQualifiedName(t.Key) {
		if t.Key != "" {
			errs = append(errs, field.Invalid(path.Child("key"), t.Key, msg))
		}
	}
	for _, msg := range validation.IsValidLabelValue(t.Value) {
		errs = append(errs, field.Invalid(path.Child("value"), t.Value, msg))
	}
	if !slices.Contains(TaintEffects, t.Effect) {
		errs = append(errs, field.NotSupported(path.Child("effect"), t.Effect, TaintEffects))
	}
	return errs
}
