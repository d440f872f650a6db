package rules

import (
	"math"
	"regexp"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Prices are what one device of a GPU class costs per hour: the stack's `gpu-tenancy:prices`. The showback recording
// rules and `gpu-tenancy capacity` multiply the devices each tenant holds by them. A class without a price gets no
// cost.
type Prices struct {
	// Currency is an ISO 4217 code such as EUR or USD; every price is in it.
	Currency string `json:"currency"`
	// PerDeviceHour maps a GPU class (a `gpu-tenancy:gpuClasses[].name`) to the price of one of its devices for one
	// hour: a whole GPU for a whole-GPU class, one MIG slice for a MIG class.
	PerDeviceHour map[string]float64 `json:"perDeviceHour"`
}

// IsSet reports whether any price is given.
func (p Prices) IsSet() bool { return len(p.PerDeviceHour) > 0 }

// Classes are the priced classes, sorted.
func (p Prices) Classes() []string {
	classes := make([]string, 0, len(p.PerDeviceHour))
	for c := range p.PerDeviceHour {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	return classes
}

// FormatPrice writes a price as its shortest decimal, the way PromQL and the reports spell it (2.93, not 2.930000).
func FormatPrice(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// currencyRE is an ISO 4217 alphabetic code (https://www.iso.org/iso-4217-currency-codes.html): three capital letters.
var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// Validate checks the prices at path (the Platform passes `gpu-tenancy:prices`) against the catalog's class names:
// a currency with the prices, each class one of classes, each price a positive finite number. An empty block is
// valid: no costs.
func (p Prices) Validate(path *field.Path, classes []string) field.ErrorList {
	var errs field.ErrorList
	switch {
	case p.Currency == "" && p.IsSet():
		errs = append(errs, field.Required(path.Child("currency"), "the currency of the prices, an ISO 4217 code such as EUR or USD"))
	case p.Currency != "" && !currencyRE.MatchString(p.Currency):
		errs = append(errs, field.Invalid(path.Child("currency"), p.Currency, "must be an ISO 4217 code: three capital letters, such as EUR or USD"))
	case p.Currency != "" && !p.IsSet():
		errs = append(errs, field.Required(path.Child("perDeviceHour"), "a price per device-hour for at least one GPU class"))
	}
	pp := path.Child("perDeviceHour")
	for _, class := range p.Classes() {
		if !slices.Contains(classes, class) {
			errs = append(errs, field.NotSupported(pp.Key(class), class, classes))
		}
		if v := p.PerDeviceHour[class]; v <= 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			errs = append(errs, field.Invalid(pp.Key(class), v, "must be a positive price per device-hour, such as 2.5"))
		}
	}
	return errs
}
