package fieldcheck

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// UniqueNames reports names used twice in a list at path, each at <path>[i].name.
func UniqueNames(path *field.Path, names []string) field.ErrorList {
	var errs field.ErrorList
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			errs = append(errs, field.Duplicate(path.Index(i).Child("name"), n))
		}
	}
	return errs
}
