package cluster

import (
	"github.com/gpu-tenancy/gpu-tenancy/components/helmchart"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOwned(t *testing.T) {
	const owner = "gpu-tenancy.prod"
	t.Run("a typed object gains the label and the force annotation and keeps its own", func(t *testing.T) {
		args := &corev1.NamespaceArgs{Metadata: &metav1.ObjectMetaArgs{
			Name: pulumi.String("tenant-a"), Labels: pulumi.StringMap{"team": pulumi.String("a")},
			Annotations: pulumi.StringMap{"note": pulumi.String("x")},
		}}
		got := owned(args, owner).(*corev1.NamespaceArgs)
		labels := got.Metadata.(*metav1.ObjectMetaArgs).Labels.(pulumi.StringMap)
		assert.Equal(t, pulumi.String(owner), labels[naming.StackLabel])
		assert.Equal(t, pulumi.String("a"), labels["team"])
		annotations := got.Metadata.(*metav1.ObjectMetaArgs).Annotations.(pulumi.StringMap)
		assert.Equal(t, pulumi.StringMap{"note": pulumi.String("x"), ForceApplyAnnotation: pulumi.String("true")}, annotations)
		assert.NotContains(t, args.Metadata.(*metav1.ObjectMetaArgs).Labels.(pulumi.StringMap), naming.StackLabel,
			"the caller's args are not changed")
	})
	t.Run("an object without labels gains them", func(t *testing.T) {
		args := &corev1.ConfigMapArgs{Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("x")}}
		got := owned(args, owner).(*corev1.ConfigMapArgs)
		assert.Equal(t, pulumi.StringMap{naming.StackLabel: pulumi.String(owner)}, got.Metadata.(*metav1.ObjectMetaArgs).Labels)
	})
	t.Run("a custom resource's untyped metadata gains the label", func(t *testing.T) {
		args := kubernetes.UntypedArgs{"metadata": &metav1.ObjectMetaArgs{Name: pulumi.String("rules")}}
		got := owned(args, owner).(kubernetes.UntypedArgs)
		assert.Equal(t, pulumi.StringMap{naming.StackLabel: pulumi.String(owner)}, got["metadata"].(*metav1.ObjectMetaArgs).Labels)
		assert.Nil(t, args["metadata"].(*metav1.ObjectMetaArgs).Labels)
	})
	t.Run("a patch of someone else's object is left alone", func(t *testing.T) {
		args := &corev1.ConfigMapPatchArgs{Metadata: &metav1.ObjectMetaPatchArgs{Name: pulumi.String("x")}}
		assert.Same(t, args, owned(args, owner))
	})
	t.Run("a Helm release has no metadata to label", func(t *testing.T) {
		args := &helmchart.ReleaseArgs{Chart: pulumi.String("x")}
		assert.Same(t, args, owned(args, owner))
	})
}

func TestOwnedTransform(t *testing.T) {
	const owner = "gpu-tenancy.prod"
	transform := ownedTransform(owner)
	t.Run("an object a chart renders gains the label and the force annotation", func(t *testing.T) {
		props := pulumi.Map{"metadata": pulumi.Map{"name": pulumi.String("team-a"), "labels": pulumi.Map{"app": pulumi.String("vcluster")}}}
		res := transform(t.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: "kubernetes:apps/v1:StatefulSet", Props: props})
		require.NotNil(t, res)
		meta := res.Props["metadata"].(pulumi.Map)
		assert.Equal(t, pulumi.Map{"app": pulumi.String("vcluster"), naming.StackLabel: pulumi.String(owner)}, meta["labels"])
		assert.Equal(t, pulumi.Map{ForceApplyAnnotation: pulumi.String("true")}, meta["annotations"])
		assert.Equal(t, pulumi.Map{"app": pulumi.String("vcluster")}, props["metadata"].(pulumi.Map)["labels"], "the original props are not changed")
	})
	t.Run("an object that has both already is left alone", func(t *testing.T) {
		props := pulumi.Map{"metadata": pulumi.Map{
			"labels":      pulumi.Map{naming.StackLabel: pulumi.String(owner)},
			"annotations": pulumi.Map{ForceApplyAnnotation: pulumi.String("true")},
		}}
		assert.Nil(t, transform(t.Context(), &pulumi.ResourceTransformArgs{Custom: true, Type: "kubernetes:core/v1:Secret", Props: props}))
	})
	for _, c := range []struct {
		name string
		args pulumi.ResourceTransformArgs
	}{
		{"a component", pulumi.ResourceTransformArgs{Type: "kubernetes:helm.sh/v4:Chart", Props: pulumi.Map{}}},
		{"a patch of another's object", pulumi.ResourceTransformArgs{Custom: true, Type: "kubernetes:core/v1:ConfigMapPatch",
			Props: pulumi.Map{"metadata": pulumi.Map{}}}},
		{"a cloud resource", pulumi.ResourceTransformArgs{Custom: true, Type: "gcp:container/cluster:Cluster", Props: pulumi.Map{}}},
		{"labels not known yet", pulumi.ResourceTransformArgs{Custom: true, Type: "kubernetes:core/v1:Secret",
			Props: pulumi.Map{"metadata": pulumi.Map{"labels": pulumi.StringMap{}.ToStringMapOutput()}}}},
	} {
		t.Run(c.name+" is left alone", func(t *testing.T) {
			assert.Nil(t, transform(t.Context(), &c.args))
		})
	}
}

func TestWithEntryOnAnOutput(t *testing.T) {
	mocks := &recordLabels{}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		labels := pulumi.StringMap{"team": pulumi.String("a")}.ToStringMapOutput()
		_, err := corev1.NewNamespace(ctx, "ns", &corev1.NamespaceArgs{Metadata: &metav1.ObjectMetaArgs{
			Labels: withEntry(labels, naming.StackLabel, "gpu-tenancy.prod"),
		}})
		return err
	}, pulumi.WithMocks("gpu-tenancy", "prod", mocks))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "a", naming.StackLabel: "gpu-tenancy.prod"}, mocks.labels)
}

// recordLabels keeps the labels of the object registered.
type recordLabels struct{ labels map[string]string }

func (r *recordLabels) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	r.labels = map[string]string{}
	for k, v := range args.Inputs["metadata"].ObjectValue()["labels"].ObjectValue() {
		r.labels[string(k)] = v.StringValue()
	}
	return args.Name, args.Inputs, nil
}

func (*recordLabels) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return args.Args, nil
}
