package tenancy

import (
	"context"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// device builds a device as the NVIDIA DRA driver publishes it (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0
// cmd/gpu-kubelet-plugin/deviceinfo.go).
func device(driver string, attrs map[string]string) dracel.Device {
	d := dracel.Device{Driver: driver, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}}
	for k, v := range attrs {
		d.Attributes[resourceapi.QualifiedName(k)] = resourceapi.DeviceAttribute{StringValue: &v}
	}
	return d
}

var (
	a100Whole = device(Driver, map[string]string{"type": "gpu", "productName": "NVIDIA A100-SXM4-40GB"})
	a100MIG1g = device(Driver, map[string]string{"type": "mig", "productName": "NVIDIA A100-SXM4-40GB", "profile": "1g.5gb"})
	a100MIG2g = device(Driver, map[string]string{"type": "mig", "productName": "NVIDIA A100-SXM4-40GB", "profile": "2g.10gb"})
	l4Whole   = device(Driver, map[string]string{"type": "gpu", "productName": "NVIDIA L4"})
	otherGPU  = device("gpu.example.com", map[string]string{"type": "gpu", "productName": "NVIDIA A100-SXM4-40GB"})
)

func matches(t *testing.T, expr string, d dracel.Device) bool {
	t.Helper()
	newExpressions := environment.NewExpressions
	res := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(expr, dracel.Options{EnvType: &newExpressions})
	require.Nil(t, res.Error, "selector %q must compile", expr)
	ok, _, err := res.DeviceMatches(context.Background(), d)
	require.NoError(t, err, "selector %q on %v", expr, d.Attributes)
	return ok
}

func TestGPUClassCEL(t *testing.T) {
	const (
		driverAndType = `device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == `
		product       = ` && device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('(^|[^a-z0-9])a100([^a-z0-9]|$)')`
	)
	tests := []struct {
		name  string
		class GPUClass
		want  string
		// which devices the compiled selector must select
		selects, skips []dracel.Device
	}{
		{
			name:    "whole GPU of any product",
			class:   GPUClass{Name: "gpu-any", Device: WholeGPU},
			want:    driverAndType + `'gpu'`,
			selects: []dracel.Device{a100Whole, l4Whole},
			skips:   []dracel.Device{a100MIG1g, otherGPU},
		},
		{
			name:    "whole A100 matches product case-insensitively",
			class:   GPUClass{Name: "a100", Device: WholeGPU, Product: "A100"},
			want:    driverAndType + `'gpu'` + product,
			selects: []dracel.Device{a100Whole},
			skips:   []dracel.Device{l4Whole, a100MIG1g, otherGPU},
		},
		{
			name:    "MIG profile checks the type before the profile",
			class:   GPUClass{Name: "mig-1g", Device: MIG, MIGProfile: "1g.5gb"},
			want:    driverAndType + `'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.5gb'`,
			selects: []dracel.Device{a100MIG1g},
			skips:   []dracel.Device{a100MIG2g, a100Whole, l4Whole},
		},
		{
			name:    "MIG profile with product",
			class:   GPUClass{Name: "mig-1g-a100", Device: MIG, MIGProfile: "1g.5gb", Product: "a100"},
			want:    driverAndType + `'mig' && device.attributes['gpu.nvidia.com'].profile == '1g.5gb'` + product,
			selects: []dracel.Device{a100MIG1g},
			skips:   []dracel.Device{a100MIG2g, a100Whole},
		},
		{
			name:    "extra CEL is ANDed in parentheses",
			class:   GPUClass{Name: "l4", Device: WholeGPU, ExtraCEL: `device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4' || false`},
			want:    driverAndType + `'gpu' && (device.attributes['gpu.nvidia.com'].productName == 'NVIDIA L4' || false)`,
			selects: []dracel.Device{l4Whole},
			skips:   []dracel.Device{a100Whole, a100MIG1g},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.class.CEL()
			assert.Equal(t, tt.want, got)
			require.Empty(t, tt.class.Validate(field.NewPath("class")))
			for _, d := range tt.selects {
				assert.True(t, matches(t, got, d), "must select %v", d.Attributes)
			}
			for _, d := range tt.skips {
				assert.False(t, matches(t, got, d), "must skip %s %v", d.Driver, d.Attributes)
			}
		})
	}
}

func TestCELStringEscapesEveryLiteralBreakout(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "a100", `'a100'`},
		{"single quote", `a' || true || '`, `'a\' || true || \''`},
		{"backslash", `a\`, `'a\\'`},
		{"newline", "a\nb", `'a\u000ab'`},
		{"unicode kept", "ü", `'ü'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := celString(tt.in)
			assert.Equal(t, tt.want, got)
			// The literal compiles and evaluates back to the input: nothing escaped the quotes.
			expr := "device.driver == " + got
			assert.True(t, matches(t, expr, device(tt.in, nil)), "literal %s must equal %q", got, tt.in)
		})
	}
}

func TestGPUClassProductQuoteCannotWidenTheSelector(t *testing.T) {
	c := GPUClass{Name: "sneaky", Device: WholeGPU, Product: `x') || true || ('`}
	assert.NotEmpty(t, c.Validate(field.NewPath("class")), "a product is a name fragment, not CEL")
	assert.False(t, matches(t, c.CEL(), a100Whole), "even unchecked, the product stays inside its literal")
}

func TestGPUClassValidate(t *testing.T) {
	tests := []struct {
		name     string
		class    GPUClass
		wantPath string
		wantErr  string
	}{
		{"empty name", GPUClass{Device: WholeGPU}, "class.name", "DNS-1123 subdomain"},
		{"upper-case name", GPUClass{Name: "A100", Device: WholeGPU}, "class.name", "RFC 1123 subdomain"},
		{"driver class name", GPUClass{Name: "gpu.nvidia.com", Device: WholeGPU}, "class.name", "the NVIDIA DRA driver creates itself"},
		{"a future driver class", GPUClass{Name: "nvl.gpu.nvidia.com", Device: WholeGPU}, "class.name", "the NVIDIA DRA driver creates itself"},
		{"unknown device kind", GPUClass{Name: "x", Device: "vfio"}, "class.device", `"gpu", "mig"`},
		{"MIG without profile", GPUClass{Name: "x", Device: MIG}, "class.migProfile", "such as 1g.5gb"},
		{"MIG profile misspelt", GPUClass{Name: "x", Device: MIG, MIGProfile: "1g5gb"}, "class.migProfile", "must be a MIG profile"},
		{"profile on whole GPU", GPUClass{Name: "x", Device: WholeGPU, MIGProfile: "1g.5gb"}, "class.migProfile", "only applies with device: mig"},
		{"non-ASCII product", GPUClass{Name: "x", Device: WholeGPU, Product: "Ä100"}, "class.product", "letters, digits"},
		{"extra CEL syntax error", GPUClass{Name: "x", Device: WholeGPU, ExtraCEL: "device.driver =="}, "class.extraCEL", "selector"},
		{"extra CEL not bool", GPUClass{Name: "x", Device: WholeGPU, ExtraCEL: "device.driver"}, "class.extraCEL", "must evaluate to bool"},
		{"extra CEL breaks out of its parentheses", GPUClass{Name: "x", Device: WholeGPU, ExtraCEL: "true) || (true"}, "class.extraCEL", "selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := tt.class.Validate(field.NewPath("class"))
			require.NotEmpty(t, errs)
			found := false
			for _, e := range errs {
				found = found || e.Field == tt.wantPath && strings.Contains(e.Error(), tt.wantErr)
			}
			assert.True(t, found, "want %s mentioning %q, got %v", tt.wantPath, tt.wantErr, errs)
		})
	}
}

func TestGPUClassValidateReportsEveryProblem(t *testing.T) {
	errs := GPUClass{Name: "X", Device: MIG, Product: "a;b"}.Validate(field.NewPath("class"))
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Field)
	}
	assert.ElementsMatch(t, []string{"class.name", "class.product", "class.migProfile"}, paths)
}

func TestValidateClassesRefusesRepeatedNames(t *testing.T) {
	errs := ValidateClasses(field.NewPath("classes"), []GPUClass{
		{Name: "a100", Device: WholeGPU}, {Name: "a100", Device: MIG, MIGProfile: "1g.5gb"},
	})
	require.Len(t, errs, 1)
	assert.Equal(t, "classes[1].name", errs[0].Field)
	assert.Equal(t, field.ErrorTypeDuplicate, errs[0].Type)
}

func TestExtendedResourceNames(t *testing.T) {
	whole := func(name, resource string) GPUClass {
		return GPUClass{Name: name, Device: WholeGPU, ExtendedResourceName: resource}
	}
	tests := []struct {
		name    string
		classes []GPUClass
		// wantField and wantDetail name the one error expected; empty when the classes are valid.
		wantField, wantDetail string
	}{
		{"the default name", []GPUClass{whole("a100", "")}, "", ""},
		{"a name of the operator's domain", []GPUClass{whole("a100", "gpus.example.com/a100-40gb")}, "", ""},
		{"a name without a domain", []GPUClass{whole("a100", "a100")}, "classes[0].extendedResourceName", "domain-prefixed"},
		{"the device plugin's name", []GPUClass{whole("a100", "nvidia.com/gpu")}, "classes[0].extendedResourceName", "nvidia.com/"},
		{"a MIG name of the device plugin", []GPUClass{whole("a100", "nvidia.com/mig-1g.5gb")}, "classes[0].extendedResourceName", "device plugin"},
		{"the implicit per-class name", []GPUClass{whole("a100", "deviceclass.resource.kubernetes.io/a100")},
			"classes[0].extendedResourceName", "implicit name"},
		{"a name under kubernetes.io", []GPUClass{whole("a100", "kubernetes.io/gpu")}, "classes[0].extendedResourceName", "kubernetes.io"},
		{"the quota's prefix", []GPUClass{whole("a100", "requests.example.com/gpu")}, "classes[0].extendedResourceName", "quota's prefix"},
		{"a name whose quota key is not a qualified name", []GPUClass{whole("a100", "example.com/-gpu")},
			"classes[0].extendedResourceName", "quota key requests.example.com/-gpu"},
		{"a name too long for its quota key", []GPUClass{whole("a100", "example.com/"+strings.Repeat("g", 64))},
			"classes[0].extendedResourceName", "must be no more than 63"},
		{"a name another class maps", []GPUClass{whole("a100", "example.com/gpu"), whole("h100", "example.com/gpu")},
			"classes[1].extendedResourceName", "is class a100's already"},
		{"a name that is another class's default", []GPUClass{whole("a100", ""), whole("h100", "gpu-tenancy.io/a100")},
			"classes[1].extendedResourceName", "is class a100's already"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateClasses(field.NewPath("classes"), tt.classes)
			if tt.wantField == "" {
				assert.Empty(t, errs)
				return
			}
			require.Len(t, errs, 1, "%v", errs)
			assert.Equal(t, tt.wantField, errs[0].Field)
			assert.Contains(t, errs[0].Error(), tt.wantDetail)
		})
	}
	assert.Equal(t, "gpu-tenancy.io/a100-1g.5gb", GPUClass{Name: "a100-1g.5gb"}.ResourceName(), "the default: the class's name in the product's domain")
}

func TestGPUClassSelectsFromPool(t *testing.T) {
	whole := cluster.GPUPool{Model: cluster.A100x40GB}
	mig := cluster.GPUPool{Model: cluster.A100x40GB, MIGProfile: "1g.5gb"}
	l4 := cluster.GPUPool{Model: cluster.L4}
	tests := []struct {
		name  string
		class GPUClass
		pool  cluster.GPUPool
		want  bool
	}{
		{"whole GPUs from a whole pool", GPUClass{Device: WholeGPU}, whole, true},
		{"no whole GPU from a partitioned pool", GPUClass{Device: WholeGPU}, mig, false},
		{"its profile from a partitioned pool", GPUClass{Device: MIG, MIGProfile: "1g.5gb"}, mig, true},
		{"another profile is not offered", GPUClass{Device: MIG, MIGProfile: "2g.10gb"}, mig, false},
		{"the product must match", GPUClass{Device: WholeGPU, Product: "A100"}, l4, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, tt.class.SelectsFrom(tt.pool)) })
	}
}
