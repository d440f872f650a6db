package tenancy

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// device builds a device as the NVIDIA DRA driver publishes it (gpu-facts 1.6).
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
			require.NoError(t, tt.class.Validate())
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
	require.NoError(t, c.Validate())
	assert.False(t, matches(t, c.CEL(), a100Whole))
}

func TestGPUClassValidate(t *testing.T) {
	tests := []struct {
		name    string
		class   GPUClass
		wantErr string
	}{
		{"empty name", GPUClass{Device: WholeGPU}, "class name is empty"},
		{"upper-case name", GPUClass{Name: "A100", Device: WholeGPU}, "must be a DNS subdomain"},
		{"driver class name", GPUClass{Name: "gpu.nvidia.com", Device: WholeGPU}, "reserved for the NVIDIA DRA driver"},
		{"unknown device kind", GPUClass{Name: "x", Device: "vfio"}, `device "vfio" is not`},
		{"MIG without profile", GPUClass{Name: "x", Device: MIG}, `MIGProfile "" is not a MIG profile`},
		{"MIG profile misspelt", GPUClass{Name: "x", Device: MIG, MIGProfile: "1g5gb"}, `MIGProfile "1g5gb" is not a MIG profile`},
		{"profile on whole GPU", GPUClass{Name: "x", Device: WholeGPU, MIGProfile: "1g.5gb"}, "is set but device is"},
		{"non-ASCII product", GPUClass{Name: "x", Device: WholeGPU, Product: "Ä100"}, "must be printable ASCII"},
		{"bad tenant", GPUClass{Name: "x", Device: WholeGPU, Tenants: []string{"Team_A"}}, `tenant name "Team_A"`},
		{"tenant twice", GPUClass{Name: "x", Device: WholeGPU, Tenants: []string{"a", "a"}}, `tenant "a" is granted twice`},
		{"extra CEL syntax error", GPUClass{Name: "x", Device: WholeGPU, ExtraCEL: "device.driver =="}, "ExtraCEL: selector"},
		{"extra CEL not bool", GPUClass{Name: "x", Device: WholeGPU, ExtraCEL: "device.driver"}, "must evaluate to bool"},
		{"extra CEL breaks out of its parentheses", GPUClass{Name: "x", Device: WholeGPU, ExtraCEL: "true) || (true"}, "ExtraCEL: selector"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.class.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestGPUClassValidateReportsEveryProblem(t *testing.T) {
	err := GPUClass{Name: "X", Device: MIG, Tenants: []string{"B"}}.Validate()
	require.Error(t, err)
	for _, want := range []string{`GPU class "X"`, "DNS subdomain", "MIGProfile", `tenant name "B"`} {
		assert.Contains(t, err.Error(), want)
	}
}
