// Package fieldcheck holds the small checks every component's Validate uses, so that a DNS name or a quantity is
// judged the same way wherever it appears. Each returns errors in the style of
// k8s.io/apimachinery/pkg/util/validation/field: the path, the value given and what is allowed.
package fieldcheck

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DNSLabel checks an RFC 1123 label of at most maxLen characters.
func DNSLabel(p *field.Path, name string, maxLen int) field.ErrorList {
	return dnsName(p, name, maxLen, "a DNS-1123 label: lowercase letters, digits and '-'", validation.IsDNS1123Label)
}

// DNSSubdomain checks an RFC 1123 subdomain of at most maxLen characters.
func DNSSubdomain(p *field.Path, name string, maxLen int) field.ErrorList {
	return dnsName(p, name, maxLen, "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.'", validation.IsDNS1123Subdomain)
}

func dnsName(p *field.Path, name string, maxLen int, want string, check func(string) []string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, want)}
	}
	var errs field.ErrorList
	for _, msg := range check(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	if len(errs) == 0 && len(name) > maxLen {
		errs = append(errs, field.TooLong(p, name, maxLen))
	}
	return errs
}

// OneOf reports a value outside allowed: missing, or not supported; nil when it is allowed.
func OneOf(p *field.Path, value string, allowed []string) *field.Error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	if value == "" {
		return field.Required(p, "one of "+strings.Join(allowed, ", "))
	}
	return field.NotSupported(p, value, allowed)
}

// Quantity checks a Kubernetes quantity; with positive it must also be above zero (a quota or a size of zero
// leaves nothing to run). An empty value is left to the caller: it means "unset" for optional fields.
func Quantity(p *field.Path, value string, positive bool) field.ErrorList {
	if value == "" {
		return nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || (positive && q.Sign() <= 0) {
		return field.ErrorList{field.Invalid(p, value, "must be a positive Kubernetes quantity such as 4, 500m or 16Gi")}
	}
	return nil
}

// CIDR accepts only canonical prefixes (no host bits), as the API server's strict CIDR validation does.
func CIDR(p *field.Path, c string) field.ErrorList {
	prefix, err := netip.ParsePrefix(c)
	if err != nil {
		return field.ErrorList{field.Invalid(p, c, "must be a CIDR such as 10.0.0.0/8 or fd00::/8")}
	}
	if prefix != prefix.Masked() {
		return field.ErrorList{field.Invalid(p, c, fmt.Sprintf("has host bits set; use %s", prefix.Masked()))}
	}
	return nil
}

// NarrowCIDR is CIDR for a range that may not hold every address: whole says why a /0 is refused.
func NarrowCIDR(p *field.Path, c, whole string) field.ErrorList {
	if errs := CIDR(p, c); len(errs) > 0 {
		return errs
	}
	if netip.MustParsePrefix(c).Bits() == 0 {
		return field.ErrorList{field.Invalid(p, c, whole)}
	}
	return nil
}

// HTTPSURL checks an https URL with a host; placeholder, when set, is replaced by a sample value first (a URL
// template such as https://{tenant}.example.com).
func HTTPSURL(p *field.Path, value, placeholder, example string) field.ErrorList {
	check := value
	if placeholder != "" {
		check = strings.ReplaceAll(value, placeholder, "sample")
	}
	u, err := url.Parse(check)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return field.ErrorList{field.Invalid(p, value, fmt.Sprintf("must be an https URL such as %s", example))}
	}
	return nil
}
