package cluster

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MinKubernetesMinor is the oldest Kubernetes minor the platform supports. DRA on resource.k8s.io/v1 is GA from 1.34
// (https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/), but 1.34 left Kapsule's
// support on 2026-11-29 and its kubelets do not check the image-pull credentials of cached images
// (KubeletEnsureSecretPulledImages is on by default from 1.35), which tenants sharing nodes rely on.
const MinKubernetesMinor = 35

// ExtendedResourcesMinor is the first minor on which a pod may ask for a DeviceClass by its extended-resource name
// out of the box: the DRAExtendedResource feature gate, which kube-apiserver, the scheduler, the controller-manager
// and the kubelet all need, is alpha and off in 1.34 and 1.35, beta and on from 1.36, and locked on in 1.37
// (k8s.io/kubernetes v1.36.3 and v1.37.2 pkg/features/kube_features.go DRAExtendedResource; KEP-5004,
// https://github.com/kubernetes/enhancements/tree/master/keps/sig-scheduling/5004-dra-extended-resource). On an
// older cluster the API server drops the field silently.
const ExtendedResourcesMinor = 36

// MinorOf is the minor of a Kubernetes version such as 1.36 or 1.36.3-gke.100; false when v is not one.
func MinorOf(v string) (int, bool) {
	m := versionRE.FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	minor, err := strconv.Atoi(m[1])
	return minor, err == nil
}

// SupportedMinor is one row of a cloud's table of Kubernetes minors: until when the cloud supports it, and where that
// is written.
type SupportedMinor struct {
	Minor int
	// EndOfSupport is the last day the cloud supports the minor; a cluster past it is refused at preview.
	EndOfSupport time.Time
	// Source is the public page that gives the date.
	Source string
	// Verified says the date was read at Source; a row that could not be checked only warns once past its date.
	Verified bool
	// ExtendedResources is the cloud's page that says its clusters of this minor keep a DeviceClass's
	// extended-resource name (the DRAExtendedResource feature gate on, ExtendedResourcesMinor); empty when no such page
	// could be read here, and a preview of a tenant asking for GPUs by name says so.
	ExtendedResources string
}

// SupportTable is a cloud's supported Kubernetes minors, oldest first, each with its end of support.
type SupportTable struct {
	// Cloud names the cloud in messages ("GKE", "Kapsule").
	Cloud string
	Rows  []SupportedMinor
}

// Date is a day in UTC, for the tables' end-of-support dates.
func Date(year int, month time.Month, day int) time.Time {
	return time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
}

func (t SupportTable) row(minor int) (SupportedMinor, bool) {
	for _, r := range t.Rows {
		if r.Minor == minor {
			return r, true
		}
	}
	return SupportedMinor{}, false
}

// ExtendedResourcesUnverified says whether v is a minor of the table whose row does not vouch for extended-resource
// names (SupportedMinor.ExtendedResources): a row not read here, or a minor newer than the table's.
func (t SupportTable) ExtendedResourcesUnverified(v string) bool {
	minor, ok := MinorOf(v)
	if !ok || minor < ExtendedResourcesMinor {
		return false
	}
	r, ok := t.row(minor)
	return !ok || r.ExtendedResources == ""
}

// Allowed are the minors the table supports on day now, as "1.35, 1.36"; the range a refusal names.
func (t SupportTable) Allowed(now time.Time) string {
	var out []string
	for _, r := range t.Rows {
		if r.Minor >= MinKubernetesMinor && !past(r, now) {
			out = append(out, fmt.Sprintf("1.%d", r.Minor))
		}
	}
	if len(out) == 0 {
		return "none (the table is out of date: upgrade gpu-tenancy)"
	}
	return strings.Join(out, ", ")
}

// past says whether now is after the row's last day of support.
func past(r SupportedMinor, now time.Time) bool { return !now.Before(r.EndOfSupport.AddDate(0, 0, 1)) }

var (
	versionRE   = regexp.MustCompile(`^1\.([0-9]+)(\.[0-9]+)?(-gke\.[0-9]+)?$`)
	minorOnlyRE = regexp.MustCompile(`^1\.[0-9]+$`)
)

// VersionCheck is what CheckKubernetesVersion found: errors refuse the stack, warnings are said on every preview.
type VersionCheck struct {
	Errs     field.ErrorList
	Warnings []string
}

// CheckKubernetesVersion checks a cloud cluster's Kubernetes version (at path) against the platform's floor and the
// cloud's table on day now. A non-empty minorOnly refuses a patch version and says why (Kapsule takes only x.y while
// auto-upgrade is on). A minor past its end of support is refused when its row was verified, and warned of when it
// was not; a minor newer than the table's rows is warned of, since the cloud, not this table, decides what it offers.
func (t SupportTable) CheckKubernetesVersion(path *field.Path, v, minorOnly string, now time.Time) VersionCheck {
	minor, ok := MinorOf(v)
	if !ok {
		return VersionCheck{Errs: field.ErrorList{field.Invalid(path, v, "must be a Kubernetes version such as 1.35 or 1.35.2")}}
	}
	if minor < MinKubernetesMinor {
		return VersionCheck{Errs: field.ErrorList{field.Invalid(path, v, fmt.Sprintf(
			"must be 1.%d or later; %s supports %s today", MinKubernetesMinor, t.Cloud, t.Allowed(now)))}}
	}
	var c VersionCheck
	if minorOnly != "" && !minorOnlyRE.MatchString(v) {
		c.Errs = append(c.Errs, field.Invalid(path, v, "must be a minor version such as 1.35 "+minorOnly))
	}
	r, ok := t.row(minor)
	switch {
	case !ok && minor > t.Rows[len(t.Rows)-1].Minor:
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s is %s, newer than the %s versions this release of gpu-tenancy "+
			"knows (%s): it is not checked against an end of support", path, v, t.Cloud, t.Allowed(now)))
	case !ok:
		c.Errs = append(c.Errs, field.Invalid(path, v, fmt.Sprintf("is not a version %s supports; supported today: %s",
			t.Cloud, t.Allowed(now))))
	case past(r, now) && r.Verified:
		c.Errs = append(c.Errs, field.Invalid(path, v, fmt.Sprintf("left %s's support after %s (%s); supported today: %s",
			t.Cloud, r.EndOfSupport.Format(time.DateOnly), r.Source, t.Allowed(now))))
	case past(r, now):
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s is %s, whose end of %s support is given as %s, now past; that "+
			"date could not be verified (%s): check it and upgrade (supported today: %s)", path, v, t.Cloud,
			r.EndOfSupport.Format(time.DateOnly), r.Source, t.Allowed(now)))
	}
	return c
}
