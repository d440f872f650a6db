package plan

import (
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/archive"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/asset"
	"github.com/stretchr/testify/assert"
)

func TestValue(t *testing.T) {
	str := resource.NewProperty("x")
	tests := []struct {
		name string
		in   resource.PropertyValue
		want any
	}{
		{"null", resource.NewNullProperty(), nil},
		{"bool", resource.NewProperty(true), true},
		{"number", resource.NewProperty(2.0), 2.0},
		{"string", str, "x"},
		{"array keeps order", resource.NewProperty([]resource.PropertyValue{resource.NewProperty("b"), str}),
			[]any{"b", "x"}},
		{"object", resource.NewProperty(resource.PropertyMap{"k": str}), map[string]any{"k": "x"}},
		{"secret", resource.MakeSecret(str), Secret},
		{"secret inside an object", resource.NewProperty(resource.PropertyMap{"k": resource.MakeSecret(str)}),
			map[string]any{"k": Secret}},
		{"computed", resource.MakeComputed(str), Unknown},
		{"known output", resource.NewOutputProperty(resource.Output{Element: str, Known: true}), "x"},
		{"unknown output", resource.NewOutputProperty(resource.Output{}), Unknown},
		{"secret output", resource.NewOutputProperty(resource.Output{Element: str, Known: true, Secret: true}), Secret},
		{"resource reference", resource.NewResourceReferenceProperty(resource.ResourceReference{
			URN: "urn:pulumi:dev::gpu-tenancy::kubernetes:core/v1:Namespace::ns"}),
			map[string]any{"resource": "urn:pulumi:dev::gpu-tenancy::kubernetes:core/v1:Namespace::ns"}},
		{"file asset", resource.NewAssetProperty(&asset.Asset{Path: "charts/values.yaml"}),
			map[string]any{"asset": "charts/values.yaml"}},
		{"text asset", resource.NewAssetProperty(&asset.Asset{Text: "hello"}), map[string]any{"asset": "hello"}},
		{"archive of assets lists members", resource.NewArchiveProperty(&archive.Archive{
			Assets: map[string]any{"b.yaml": &asset.Asset{Text: "b"}, "a.yaml": &asset.Asset{Text: "a"}}}),
			map[string]any{"archive": []string{"a.yaml", "b.yaml"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, value(tt.in))
		})
	}
}

func TestInputsOfNoPropertiesIsAnEmptyObject(t *testing.T) {
	assert.Equal(t, map[string]any{}, inputs(nil))
}
