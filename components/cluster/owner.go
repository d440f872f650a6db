package cluster

import (
	"context"
	"maps"
	"reflect"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ForceApplyAnnotation makes the kubernetes provider's server-side apply take over fields another field manager set
// (pulumi-kubernetes v4 provider/pkg/await/await.go patchForce, metadata/annotations.go AnnotationPatchForce). Every
// object the stack owns carries it: a hand edit of a field the stack sets (kubectl edit, a client's update) is drift
// that `up` puts back, where without it the apply fails with a field-manager conflict. Objects of other stacks are
// never reached: up refuses, before creating anything, to manage an object it does not own.
const ForceApplyAnnotation = "pulumi.com/patchForce"

// owned returns the args of a Kubernetes object with the owner's label and ForceApplyAnnotation added to its
// metadata, leaving args itself untouched; anything else (a Helm release, a remote component, a patch of another's
// object) is returned as it is. Every typed object of the kubernetes SDK carries its metadata in a Metadata field of
// *metav1.ObjectMetaArgs.
func owned(args any, owner string) any {
	// A custom resource (apiextensions.NewCustomResource) registers its fields as an untyped map.
	if untyped, ok := args.(kubernetes.UntypedArgs); ok {
		meta, ok := untyped["metadata"].(*metav1.ObjectMetaArgs)
		if !ok || meta == nil {
			return args
		}
		out := maps.Clone(untyped)
		out["metadata"] = ownedMeta(meta, owner)
		return out
	}
	v := reflect.ValueOf(args)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return args
	}
	// A patch changes fields of an object someone else owns (the GPU Operator's ClusterPolicy): it must not claim it.
	if strings.HasSuffix(v.Elem().Type().Name(), "PatchArgs") {
		return args
	}
	field := v.Elem().FieldByName("Metadata")
	if !field.IsValid() {
		return args
	}
	meta, ok := field.Interface().(*metav1.ObjectMetaArgs)
	if !ok || meta == nil {
		return args
	}
	copied := reflect.New(v.Elem().Type())
	copied.Elem().Set(v.Elem())
	copied.Elem().FieldByName("Metadata").Set(reflect.ValueOf(ownedMeta(meta, owner)))
	return copied.Interface()
}

func ownedMeta(meta *metav1.ObjectMetaArgs, owner string) *metav1.ObjectMetaArgs {
	out := *meta
	out.Labels = withEntry(meta.Labels, naming.StackLabel, owner)
	out.Annotations = withEntry(meta.Annotations, ForceApplyAnnotation, "true")
	return &out
}

// withEntry adds one entry to a label or annotation map given as plain values or as an output.
func withEntry(m pulumi.StringMapInput, key, value string) pulumi.StringMapInput {
	switch l := m.(type) {
	case nil:
		return pulumi.StringMap{key: pulumi.String(value)}
	case pulumi.StringMap:
		out := maps.Clone(l)
		out[key] = pulumi.String(value)
		return out
	default:
		return l.ToStringMapOutput().ApplyT(func(m map[string]string) map[string]string {
			out := maps.Clone(m)
			if out == nil {
				out = map[string]string{}
			}
			out[key] = value
			return out
		}).(pulumi.StringMapOutput)
	}
}

// ownedTransform does what owned does for the objects that providers register beneath a component, such as the
// objects of a helm/v4 Chart, which program-side transformations never see; the engine runs it for every resource
// below the component it is given to. Objects the program registers itself arrive with both already.
func ownedTransform(owner string) pulumi.ResourceTransform {
	return func(_ context.Context, args *pulumi.ResourceTransformArgs) *pulumi.ResourceTransformResult {
		if !args.Custom || !strings.HasPrefix(args.Type, "kubernetes:") || strings.HasSuffix(args.Type, "Patch") {
			return nil
		}
		meta, ok := args.Props["metadata"].(pulumi.Map)
		if !ok {
			return nil
		}
		labels, labelsOK := mapEntry(meta, "labels")
		annotations, annotationsOK := mapEntry(meta, "annotations")
		if !labelsOK || !annotationsOK {
			// Metadata the engine does not know yet; the chart objects this is for have theirs rendered.
			return nil
		}
		if labels[naming.StackLabel] == pulumi.String(owner) && annotations[ForceApplyAnnotation] == pulumi.String("true") {
			return nil
		}
		labels[naming.StackLabel] = pulumi.String(owner)
		annotations[ForceApplyAnnotation] = pulumi.String("true")
		meta = maps.Clone(meta)
		meta["labels"], meta["annotations"] = labels, annotations
		props := maps.Clone(args.Props)
		props["metadata"] = meta
		return &pulumi.ResourceTransformResult{Props: props, Opts: args.Opts}
	}
}

// mapEntry returns a copy of a map-valued metadata entry (empty when absent), and false when it is not a known map.
func mapEntry(meta pulumi.Map, key string) (pulumi.Map, bool) {
	switch v := meta[key].(type) {
	case nil:
		return pulumi.Map{}, true
	case pulumi.Map:
		return maps.Clone(v), true
	default:
		return nil, false
	}
}
