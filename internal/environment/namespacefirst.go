package environment

import (
	"context"
	"encoding/json"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// namespaceType is the type token of a Namespace in a stack's state.
const namespaceType = "kubernetes:core/v1:Namespace"

// recordedNamespace is a namespace as a stack's state records it: its name (the kubernetes provider's ID of a
// cluster-scoped object) and the UID it had when last written.
type recordedNamespace struct {
	Name string
	UID  types.UID
}

// recordedNamespaces are the namespaces of a stack's state whose UID it holds, in state order.
func recordedNamespaces(res []stateResource) []recordedNamespace {
	var out []recordedNamespace
	for _, r := range res {
		if r.Type != namespaceType || !r.Custom || r.ID == "" {
			continue
		}
		var outputs struct {
			Metadata struct {
				UID types.UID `json:"uid"`
			} `json:"metadata"`
		}
		if json.Unmarshal(r.Outputs, &outputs) != nil || outputs.Metadata.UID == "" {
			continue
		}
		out = append(out, recordedNamespace{Name: r.ID, UID: outputs.Metadata.UID})
	}
	return out
}

// deleteNamespacesFirst asks the API server to delete, in the background, the namespaces a group's destroy deletes
// anyway (Environment.groupDestroys), once its engine has started (Stack.destroy). The engine deletes a namespace only
// after every object that depends on it: the vCluster chart's objects are applied by the provider, where no
// DeletedWith reaches them (cluster.Cluster ResourceOptions), so each is a delete step of its own, and with a hundred
// tenants those steps took about 90 s of CPU before the first namespace was deleted (docs/benchmarks.md). Deleted
// first, the namespaces terminate while the engine works; its deletes of what they held then find it gone or going.
// Each delete is held to the UID the state recorded: it removes nothing but the object the state recorded (the engine's
// own delete that follows is by name, as always). A namespace that is gone already or was made again since is left to
// the engine.
func deleteNamespacesFirst(ctx context.Context, client kubernetes.Interface, namespaces []recordedNamespace, say func(string, ...any)) {
	background := metav1.DeletePropagationBackground
	for _, ns := range namespaces {
		err := client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &ns.UID}, PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			say("namespace %s: not deleted ahead of the destroy, which deletes it in its turn: %v", ns.Name, err)
		}
	}
}
