package platform

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	metadatafake "k8s.io/client-go/metadata/fake"
)

// existingObject is a cluster-scoped object as the metadata client returns it.
func existingObject(kind, name string, labels map[string]string) runtime.Object {
	gvr := ownedKinds[kind]
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: schema.GroupVersion{Group: gvr.Group, Version: gvr.Version}.String(), Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
	}
}

func TestCheckOwnership(t *testing.T) {
	const me = "gpu-tenancy.prod"
	refs := []naming.ObjectRef{
		{Kind: naming.KindDeviceClass, Name: "gpu-whole"},
		{Kind: naming.KindNamespace, Name: "tenant-legal-ai"},
		{Kind: naming.KindPolicy, Name: "gpu-tenancy-claim-namespace"},
	}
	cases := []struct {
		name     string
		existing []runtime.Object
		adopt    []string
		// wantLines are the objects the refusal must name, one line each; none means no refusal.
		wantLines []string
	}{
		{name: "nothing exists yet"},
		{
			name:     "objects labelled for this stack are its own",
			existing: []runtime.Object{existingObject(naming.KindDeviceClass, "gpu-whole", map[string]string{naming.StackLabel: me})},
		},
		{
			name: "an object of another stack is refused with its owner",
			existing: []runtime.Object{
				existingObject(naming.KindDeviceClass, "gpu-whole", map[string]string{naming.StackLabel: "gpu-tenancy.staging"}),
			},
			wantLines: []string{"DeviceClass gpu-whole exists and belongs to stack gpu-tenancy.staging"},
		},
		{
			name:      "an unlabelled object is refused as belonging to no stack",
			existing:  []runtime.Object{existingObject(naming.KindNamespace, "tenant-legal-ai", nil)},
			wantLines: []string{"Namespace tenant-legal-ai exists and belongs to no stack"},
		},
		{
			name: "every foreign object is named, one line each",
			existing: []runtime.Object{
				existingObject(naming.KindDeviceClass, "gpu-whole", map[string]string{naming.StackLabel: "gpu-tenancy.staging"}),
				existingObject(naming.KindPolicy, "gpu-tenancy-claim-namespace", map[string]string{naming.StackLabel: "gpu-tenancy.staging"}),
			},
			wantLines: []string{
				"DeviceClass gpu-whole exists and belongs to stack gpu-tenancy.staging",
				"ValidatingAdmissionPolicy gpu-tenancy-claim-namespace exists and belongs to stack gpu-tenancy.staging",
			},
		},
		{
			name:     "an object listed in ownership.adopt may be taken over",
			existing: []runtime.Object{existingObject(naming.KindNamespace, "tenant-legal-ai", nil)},
			adopt:    []string{"Namespace/tenant-legal-ai"},
		},
		{
			name:      "adopting one object does not adopt another of the same name",
			existing:  []runtime.Object{existingObject(naming.KindNamespace, "tenant-legal-ai", nil)},
			adopt:     []string{"DeviceClass/tenant-legal-ai"},
			wantLines: []string{"Namespace tenant-legal-ai exists and belongs to no stack"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			scheme := metadatafake.NewTestScheme()
			require.NoError(t, metav1.AddMetaToScheme(scheme))
			client := metadatafake.NewSimpleMetadataClient(scheme, c.existing...)
			err := checkOwnership(context.Background(), client, me, refs, c.adopt, ConfigKeys.Path(keyOwnership).Child("adopt"))
			if len(c.wantLines) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			msg := err.Error()
			for _, line := range c.wantLines {
				assert.Contains(t, msg, line)
			}
			assert.Equal(t, len(c.wantLines), strings.Count(msg, "\n  - "), "one line per foreign object")
			assert.Contains(t, msg, "A cluster holds one platform stack")
			assert.Contains(t, msg, "gpu-tenancy:ownership.adopt")
		})
	}
}

// The check costs one request per kind, however many tenants: a request per object ran into client-go's default rate
// limit and added seconds to every preview.
func TestOwnershipIsCheckedWithOneListPerKind(t *testing.T) {
	var refs []naming.ObjectRef
	kinds := map[string]bool{}
	for i := range 50 {
		for _, kind := range []string{naming.KindNamespace, naming.KindPolicy, naming.KindPolicyBinding} {
			refs = append(refs, naming.ObjectRef{Kind: kind, Name: fmt.Sprintf("tenant-%d", i)})
			kinds[kind] = true
		}
	}
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	client := metadatafake.NewSimpleMetadataClient(scheme,
		existingObject(naming.KindNamespace, "tenant-7", map[string]string{naming.StackLabel: "gpu-tenancy.staging"}))
	err := checkOwnership(context.Background(), client, "gpu-tenancy.prod", refs, nil, ConfigKeys.Path(keyOwnership).Child("adopt"))
	require.ErrorContains(t, err, "Namespace tenant-7 exists and belongs to stack gpu-tenancy.staging")
	assert.Len(t, client.Actions(), len(kinds), "requests: %v", client.Actions())
	for _, a := range client.Actions() {
		assert.Equal(t, "list", a.GetVerb())
	}
}

func TestOwnershipConfigValidate(t *testing.T) {
	cases := []struct {
		name  string
		adopt []string
		want  string
	}{
		{name: "kind and name", adopt: []string{"DeviceClass/gpu-whole", "Namespace/tenant-a"}},
		{name: "no kind", adopt: []string{"gpu-whole"}, want: "must be Kind/name"},
		{name: "no name", adopt: []string{"DeviceClass/"}, want: "must be Kind/name"},
		{name: "a kind the program does not create", adopt: []string{"Pod/x"}, want: "supported values"},
		{name: "a name no object can have", adopt: []string{"DeviceClass/GPU_Whole"}, want: "lowercase RFC 1123"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs := OwnershipArgs{Adopt: c.adopt}.Validate(field.NewPath("gpu-tenancy:ownership"))
			if c.want == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1)
			assert.Equal(t, "gpu-tenancy:ownership.adopt[0]", errs[0].Field)
			assert.Contains(t, errs[0].Error(), c.want)
		})
	}
}

func TestOwnerLabelMustBeALabelValue(t *testing.T) {
	o, err := owner("gpu-tenancy", "prod")
	require.NoError(t, err)
	assert.Equal(t, "gpu-tenancy.prod", o)
	_, err = owner("gpu-tenancy", strings.Repeat("x", 60))
	require.ErrorContains(t, err, "use a shorter stack name")
}

func TestEveryObjectCarriesItsStacksLabelAndForceAnnotation(t *testing.T) {
	for _, stack := range []string{"gke-dev", "local"} {
		t.Run(stack, func(t *testing.T) {
			var override map[string]string
			if stack == "local" {
				override = localOverride(t)
			}
			rec, err := runStack(t, stack, override)
			require.NoError(t, err)
			n := 0
			for _, reg := range rec.All() {
				meta, ok := reg.Inputs["metadata"]
				if !reg.Custom || !strings.HasPrefix(reg.Type, "kubernetes:") || !ok || strings.HasSuffix(reg.Type, "Patch") {
					continue
				}
				n++
				labels := meta.ObjectValue()["labels"]
				require.True(t, labels.IsObject(), "%s %s has no labels", reg.Type, reg.Name)
				assert.Equal(t, "gpu-tenancy."+stack, fmtLabel(labels.ObjectValue()[naming.StackLabel]),
					"%s %s must carry its stack's label", reg.Type, reg.Name)
				annotations := meta.ObjectValue()["annotations"]
				require.True(t, annotations.IsObject(), "%s %s has no annotations", reg.Type, reg.Name)
				assert.Equal(t, "true", fmtLabel(annotations.ObjectValue()[cluster.ForceApplyAnnotation]),
					"%s %s must take back hand-edited fields", reg.Type, reg.Name)
			}
			assert.Greater(t, n, 20)
		})
	}
}

func TestPlannedObjectsAreEveryClusterScopedObject(t *testing.T) {
	sc, err := ReadStackFile("../../stacks/Pulumi.gke-dev.yaml")
	require.NoError(t, err)
	cfg, err := Load(sc.Source(), ConfigKeys)
	require.NoError(t, err)
	rec, err := runStack(t, "gke-dev", nil)
	require.NoError(t, err)
	var created []string
	for _, reg := range rec.All() {
		for kind, gvr := range ownedKinds {
			group := gvr.Group
			if group == "" {
				group = "core"
			}
			if reg.Type == "kubernetes:"+group+"/"+gvr.Version+":"+kind {
				name := reg.Inputs["metadata"].ObjectValue()["name"].StringValue()
				created = append(created, naming.ObjectRef{Kind: kind, Name: name}.String())
			}
		}
	}
	var planned []string
	for _, ref := range plannedObjects(cfg) {
		planned = append(planned, ref.String())
	}
	assert.ElementsMatch(t, created, planned)
}

func fmtLabel(v resource.PropertyValue) string {
	if v.IsString() {
		return v.StringValue()
	}
	return v.String()
}

func TestAClusterThatDoesNotAnswerIsAWarning(t *testing.T) {
	var warnings []string
	cfg := &PlatformArgs{GPUClasses: nil}
	identity, err := cfg.checkLive(context.Background(), stackInfo{project: "gpu-tenancy", stack: "prod"},
		"apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"+
			"contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n",
		"gpu-tenancy.prod", "", func(w string) { warnings = append(warnings, w) })
	require.NoError(t, err)
	assert.Empty(t, identity)
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "not checking the cluster")
}

// A cluster that answers with a refusal is never taken for one that does not answer.
func TestARefusalIsNeverMistakenForAnUnreachableCluster(t *testing.T) {
	f := newFakeCluster(t)
	f.lists["/apis/resource.k8s.io/v1/deviceclasses"] = []map[string]any{{"metadata": map[string]any{"name": "gpu-whole",
		"labels": map[string]any{naming.StackLabel: "gpu-tenancy.staging"}}}}
	cfg := &PlatformArgs{GPUClasses: []tenancy.GPUClass{{Name: "gpu-whole"}}}
	var warnings []string
	_, err := cfg.checkLive(context.Background(), stackInfo{project: "gpu-tenancy", stack: "prod"}, f.kubeconfig(), "gpu-tenancy.prod", "",
		func(w string) { warnings = append(warnings, w) })
	require.ErrorContains(t, err, "DeviceClass gpu-whole exists and belongs to stack gpu-tenancy.staging")
	assert.Empty(t, warnings)
}
