package tenancy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

// DeviceKind is the device type the NVIDIA DRA driver publishes in its `type` attribute.
type DeviceKind string

const (
	// WholeGPU is a full physical GPU (`type: gpu`).
	WholeGPU DeviceKind = "gpu"
	// MIG is a MIG partition (`type: mig`), selected by its profile.
	MIG DeviceKind = "mig"
)

// Driver is the NVIDIA DRA driver's name and the domain of its device attributes (gpu-facts 1.3, 1.6).
const Driver = "gpu.nvidia.com"

// GPUClass is one GPU class of the catalog: which devices it selects and which tenants may claim it.
type GPUClass struct {
	// Name is the DeviceClass name; vCluster mirrors it into tenants under the same name, so it is global.
	Name string
	// Device is WholeGPU or MIG.
	Device DeviceKind
	// MIGProfile is the MIG profile (for example "1g.5gb"); required for MIG, empty for WholeGPU.
	MIGProfile string
	// Product optionally narrows the class to GPUs whose productName contains it, ignoring ASCII case ("A100").
	Product string
	// ExtraCEL is an optional further selector over `device`, ANDed with the generated one.
	ExtraCEL string
	// Tenants are the tenants granted the class.
	Tenants []string
}

var migProfile = regexp.MustCompile(`^[0-9]+g\.[0-9]+gb(\+[a-z]+)?$`)

// attr is how a selector reads one of the driver's attributes (gpu-facts 1.7).
func attr(name string) string {
	return fmt.Sprintf("device.attributes[%s].%s", celString(Driver), name)
}

// CEL is the class's device selector. The type check comes before the profile check because `profile` exists only
// on MIG devices: `false && <missing key>` is false, so whole GPUs are skipped instead of failing (gpu-facts 1.7).
func (c GPUClass) CEL() string {
	terms := []string{
		"device.driver == " + celString(Driver),
		attr("type") + " == " + celString(string(c.Device)),
	}
	if c.Device == MIG {
		terms = append(terms, attr("profile")+" == "+celString(c.MIGProfile))
	}
	if c.Product != "" {
		terms = append(terms, attr("productName")+".lowerAscii().matches("+celString(cluster.ProductPattern(c.Product))+")")
	}
	if c.ExtraCEL != "" {
		terms = append(terms, "("+c.ExtraCEL+")")
	}
	return strings.Join(terms, " && ")
}

// Validate reports every problem with the class, and compiles its selector with the DRA compiler the API server
// uses, so a bad ExtraCEL fails before any resource is created.
func (c GPUClass) Validate() error {
	var errs []error
	if err := ValidateClassName(c.Name); err != nil {
		errs = append(errs, err)
	}
	switch c.Device {
	case WholeGPU:
		if c.MIGProfile != "" {
			errs = append(errs, fmt.Errorf("MIGProfile %q is set but device is %q", c.MIGProfile, WholeGPU))
		}
	case MIG:
		if !migProfile.MatchString(c.MIGProfile) {
			errs = append(errs, fmt.Errorf("MIGProfile %q is not a MIG profile such as \"1g.5gb\"", c.MIGProfile))
		}
	default:
		errs = append(errs, fmt.Errorf("device %q is not %q or %q", c.Device, WholeGPU, MIG))
	}
	if !printableASCII(c.Product) {
		// lowerAscii() folds ASCII only, so a non-ASCII product could never match.
		errs = append(errs, fmt.Errorf("product %q must be printable ASCII", c.Product))
	}
	for i, t := range c.Tenants {
		if err := ValidateTenantName(t); err != nil {
			errs = append(errs, err)
		} else if slices.Contains(c.Tenants[:i], t) {
			errs = append(errs, fmt.Errorf("tenant %q is granted twice", t))
		}
	}
	if c.ExtraCEL != "" {
		// Compiled on its own first: only a complete expression is safe to wrap in parentheses
		// ("true) || (true" is not one, yet would compile once wrapped).
		if err := compileSelector(c.ExtraCEL); err != nil {
			errs = append(errs, fmt.Errorf("ExtraCEL: %w", err))
		}
	}
	if len(errs) == 0 {
		if err := compileSelector(c.CEL()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("GPU class %q: %w", c.Name, err)
	}
	return nil
}

// compileSelector compiles a selector as the API server does when a DeviceClass is created: new-expression
// environment and the DRA cost limit.
func compileSelector(expr string) error {
	newExpressions := environment.NewExpressions
	res := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(expr, dracel.Options{EnvType: &newExpressions})
	if res.Error != nil {
		return fmt.Errorf("selector %q: %s", expr, res.Error.Detail)
	}
	if res.MaxCost > resourceapi.CELSelectorExpressionMaxCost {
		return fmt.Errorf("selector %q: estimated cost %d exceeds the API server's limit %d", expr, res.MaxCost, resourceapi.CELSelectorExpressionMaxCost)
	}
	return nil
}

// celString quotes s as a single-quoted CEL string literal; anything but printable characters is escaped, so no
// input can end the literal or the expression.
func celString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func printableASCII(s string) bool {
	for _, r := range s {
		if r < 0x20 || r > 0x7e {
			return false
		}
	}
	return true
}
