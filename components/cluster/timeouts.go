package cluster

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultNamespaceDeletion bounds the wait for a namespace to terminate when nothing else is configured: long enough
// for the namespace controller to delete a tenant's objects and the pods' grace periods, short enough that a namespace
// that cannot finish (pods on a node that no longer answers, a finalizer nobody removes) fails the run with its reason.
const DefaultNamespaceDeletion = "10m"

// namespaceType is the kubernetes provider's type token of a Namespace.
const namespaceType = "kubernetes:core/v1:Namespace"

// Timeouts bound the waits of in-cluster deletions (`gpu-tenancy:timeouts`).
type Timeouts struct {
	// NamespaceDeletion is how long a destroy, or a tenant's removal, waits for a namespace to terminate, as a Go
	// duration ("10m"); default DefaultNamespaceDeletion.
	NamespaceDeletion string `json:"namespaceDeletion"`
}

// Validate checks each timeout is a positive duration of at most a day.
func (t Timeouts) Validate(path *field.Path) field.ErrorList {
	if t.NamespaceDeletion == "" {
		return nil
	}
	d, err := time.ParseDuration(t.NamespaceDeletion)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path.Child("namespaceDeletion"), t.NamespaceDeletion, "must be a duration such as 10m or 90s")}
	case d <= 0 || d > 24*time.Hour:
		return field.ErrorList{field.Invalid(path.Child("namespaceDeletion"), t.NamespaceDeletion, "must be more than 0 and at most 24h")}
	}
	return nil
}

// namespaceDeletion is the configured wait for a namespace's deletion; the engine reads custom timeouts as Go
// durations too.
func (t Timeouts) namespaceDeletion() string {
	if t.NamespaceDeletion == "" {
		return DefaultNamespaceDeletion
	}
	return t.NamespaceDeletion
}
