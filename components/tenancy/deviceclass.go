package tenancy

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/gpu-tenancy/gpu-tenancy/components/cluster"
	"github.com/gpu-tenancy/gpu-tenancy/components/fieldcheck"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// Driver is the NVIDIA DRA driver's name and the domain of its device attributes.
const Driver = naming.Driver

// GPUClass is one GPU class of the catalog: which devices it selects. A stack's `gpuClasses[]` entry decodes into it.
type GPUClass struct {
	// Name is the DeviceClass name; vCluster mirrors it into tenants under the same name, so it is global.
	Name string `json:"name"`
	// Device is WholeGPU or MIG.
	Device DeviceKind `json:"device"`
	// MIGProfile is the MIG profile (for example "1g.5gb"); required for MIG, empty for WholeGPU.
	MIGProfile string `json:"migProfile"`
	// Product optionally narrows the class to GPUs whose productName contains it as a whole word, ignoring case ("A100").
	Product string `json:"product"`
	// ExtraCEL is an optional further selector over `device`, ANDed with the generated one.
	ExtraCEL string `json:"extraCEL"`
	// ExtendedResourceName is the name a tenant's pod asks for the class by, as a count in a container's resources
	// (KEP-5004), when a tenant granted the class gets GPUs as extended resources (gpuAccess); default
	// DefaultExtendedResourceName. Names are cluster-wide: the scheduler maps one name to one class.
	ExtendedResourceName string `json:"extendedResourceName"`
	// PlatformOnly marks a class granted to no tenant, for the platform's own namespaces; every other class must be
	// granted to at least one tenant, so no DeviceClass of the catalog is left without an owner.
	PlatformOnly bool `json:"platformOnly"`
}

var (
	migProfileRE = regexp.MustCompile(`^[0-9]+g\.[0-9]+gb(\+[a-z]+)?$`)
	// A product is a fragment of a GPU's productName, such as "A100" or "H100 PCIe".
	productRE = regexp.MustCompile(`^[A-Za-z0-9 ._-]+$`)
	// DeviceKinds are the device kinds a class may select.
	DeviceKinds = []string{string(WholeGPU), string(MIG)}
)

// attr is how a selector reads one of the driver's attributes (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0
// tests/bats/specs/gpu-simple-mig.yaml).
func attr(name string) string {
	return fmt.Sprintf("device.attributes[%s].%s", celString(Driver), name)
}

// CEL is the class's device selector. The type check comes before the profile check because `profile` exists only
// on MIG devices: `false && <missing key>` is false, so whole GPUs are skipped instead of failing
// (https://github.com/google/cel-spec/blob/master/doc/langdef.md#logical-operators).
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

// Validate checks the class and compiles its selector with the DRA compiler the API server uses, so a bad ExtraCEL
// fails before any resource is created. It is the single owner of a class's rules.
func (c GPUClass) Validate(path *field.Path) field.ErrorList {
	errs := ValidateClassName(path.Child("name"), c.Name)
	if c.Product != "" && !productRE.MatchString(c.Product) {
		errs = append(errs, field.Invalid(path.Child("product"), c.Product,
			"must be letters, digits, spaces, '.', '_' or '-', matched case-insensitively against the GPU's productName"))
	}
	switch c.Device {
	case WholeGPU:
		if c.MIGProfile != "" {
			errs = append(errs, field.Forbidden(path.Child("migProfile"), "only applies with device: mig"))
		}
	case MIG:
		if c.MIGProfile == "" {
			errs = append(errs, field.Required(path.Child("migProfile"), "a MIG profile such as 1g.5gb"))
		} else if !migProfileRE.MatchString(c.MIGProfile) {
			errs = append(errs, field.Invalid(path.Child("migProfile"), c.MIGProfile, "must be a MIG profile such as 1g.5gb"))
		}
	default:
		errs = append(errs, fieldcheck.OneOf(path.Child("device"), string(c.Device), DeviceKinds))
	}
	if c.ExtendedResourceName != "" {
		errs = append(errs, validateExtendedResourceName(path.Child("extendedResourceName"), c.ExtendedResourceName)...)
	}
	if len(errs) > 0 {
		return errs
	}
	if c.ExtraCEL != "" {
		// Compiled on its own first: only a complete expression is safe to wrap in parentheses
		// ("true) || (true" is not one, yet would compile once wrapped).
		if err := compileSelector(c.ExtraCEL); err != nil {
			return field.ErrorList{field.Invalid(path.Child("extraCEL"), c.ExtraCEL, err.Error())}
		}
	}
	if err := compileSelector(c.CEL()); err != nil {
		errs = append(errs, field.Invalid(path.Child("extraCEL"), c.ExtraCEL, err.Error()))
	}
	return errs
}

// ValidateClasses checks each class and that no class name or extended-resource name is used twice.
func ValidateClasses(path *field.Path, classes []GPUClass) field.ErrorList {
	var errs field.ErrorList
	names := make([]string, len(classes))
	resourceNames := map[string]string{}
	for i, c := range classes {
		errs = append(errs, c.Validate(path.Index(i))...)
		names[i] = c.Name
		name := c.ResourceName()
		if other, ok := resourceNames[name]; ok && other != c.Name {
			errs = append(errs, field.Invalid(path.Index(i).Child("extendedResourceName"), name, fmt.Sprintf(
				"is class %s's already: the scheduler gives one name to one class, cluster-wide (the newer class wins)", other)))
		}
		resourceNames[name] = c.Name
	}
	return append(errs, fieldcheck.UniqueNames(path, names)...)
}

// ExtendedResourceDomain is the domain of the classes' default extended-resource names.
const ExtendedResourceDomain = "gpu-tenancy.io"

// DefaultExtendedResourceName is a class's extended-resource name unless it sets one: gpu-tenancy.io/<class>, a
// valid name for every valid class name (both are at most 63 characters of the same alphabet).
func DefaultExtendedResourceName(class string) string { return ExtendedResourceDomain + "/" + class }

// ResourceName is the class's extended-resource name: its own, or the default.
func (c GPUClass) ResourceName() string {
	if c.ExtendedResourceName != "" {
		return c.ExtendedResourceName
	}
	return DefaultExtendedResourceName(c.Name)
}

// validateExtendedResourceName checks a name a class maps: what the API server takes as an extended resource (a
// domain-prefixed name outside kubernetes.io whose quota key is a qualified name: kubernetes v1.36.3
// pkg/apis/core/helper/helpers.go IsExtendedResourceName, which DeviceClass validation calls), and none of the names
// that reach GPUs outside a granted class.
func validateExtendedResourceName(path *field.Path, name string) field.ErrorList {
	domain, _, prefixed := strings.Cut(name, "/")
	switch {
	case !prefixed || domain == "":
		return field.ErrorList{field.Invalid(path, name, "must be a domain-prefixed name such as "+DefaultExtendedResourceName("a100"))}
	case strings.HasPrefix(name, "nvidia.com/"):
		return field.ErrorList{field.Invalid(path, name, "nvidia.com/ names are the NVIDIA device plugin's and driver class's, "+
			"which reach GPUs outside the grants; choose a name of your own domain")}
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"):
		return field.ErrorList{field.Invalid(path, name, "names under kubernetes.io are Kubernetes' own (deviceclass.resource.kubernetes.io/<class> "+
			"is every class's implicit name, which the quota does not charge at admission); choose a name of your own domain")}
	case strings.HasPrefix(name, naming.RequestsQuotaPrefix):
		return field.ErrorList{field.Invalid(path, name, "may not start with "+naming.RequestsQuotaPrefix+", the quota's prefix")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(naming.RequestsQuotaKey(name)) {
		errs = append(errs, field.Invalid(path, name, "its quota key "+naming.RequestsQuotaKey(name)+": "+msg))
	}
	return errs
}

// SelectsFrom reports whether a pool offers devices the class selects. A partitioned pool offers only its MIG
// devices: the driver does not announce a GPU whose MIG devices exist (kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0
// tests/bats/test_gpu_mig.bats, "StaticMIG: mutual exclusivity with physical GPU").
func (c GPUClass) SelectsFrom(p cluster.GPUPool) bool {
	if c.Product != "" && !p.Model.MatchesProduct(c.Product) {
		return false
	}
	return c.Device == WholeGPU && p.MIGProfile == "" || c.Device == MIG && p.MIGProfile == c.MIGProfile
}

// Describe says in words what the class selects and which pool would offer it.
func (c GPUClass) Describe() string {
	what := "whole GPUs"
	if c.Device == MIG {
		what = fmt.Sprintf("MIG %s devices (a pool with partition: %s)", c.MIGProfile, c.MIGProfile)
	}
	if c.Product != "" {
		what += fmt.Sprintf(" of a product matching %q", c.Product)
	}
	if c.Device == WholeGPU {
		what += " (a pool without partition)"
	}
	return "it selects " + what
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
