package environment

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// A destroy deletes ahead only the namespaces the state recorded, by their recorded UID.
func TestRecordedNamespaces(t *testing.T) {
	ns := func(id, uid string) stateResource {
		out, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": id, "uid": uid}})
		return stateResource{Type: namespaceType, Custom: true, ID: id, Outputs: out}
	}
	res := []stateResource{
		ns("vcluster-team-a", "u-a"),
		{Type: "kubernetes:core/v1:ConfigMap", Custom: true, ID: "vcluster-team-a/c"},
		ns("vcluster-team-b", ""),                          // no UID recorded: nothing to hold the delete to
		{Type: namespaceType, Custom: true, ID: "pending"}, // no outputs: created by a run that did not finish
		ns("vcluster-team-c", "u-c"),
	}
	assert.Equal(t, []recordedNamespace{{"vcluster-team-a", "u-a"}, {"vcluster-team-c", "u-c"}}, recordedNamespaces(res))
}

// Each recorded namespace is deleted in the background, held to its recorded UID (the API server refuses the delete
// of a namespace made again since under the name); one that is gone already is the engine's to report.
func TestDeleteNamespacesFirstHoldsToTheRecordedUID(t *testing.T) {
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vcluster-team-a", UID: "u-a"}})
	var sent []metav1.DeleteOptions
	client.PrependReactor("delete", "namespaces", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sent = append(sent, action.(k8stesting.DeleteActionImpl).DeleteOptions)
		return false, nil, nil
	})
	var said []string
	deleteNamespacesFirst(context.Background(), client, []recordedNamespace{{"vcluster-team-a", "u-a"}, {"vcluster-gone", "u-g"}},
		func(f string, a ...any) { said = append(said, f) })
	require.Len(t, sent, 2)
	background := metav1.DeletePropagationBackground
	assert.Equal(t, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptrTo(types.UID("u-a"))}, PropagationPolicy: &background}, sent[0])
	_, err := client.CoreV1().Namespaces().Get(context.Background(), "vcluster-team-a", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "deleted: %v", err)
	assert.Empty(t, said, "a missing namespace is the engine's to report")
}

func ptrTo[T any](v T) *T { return &v }
