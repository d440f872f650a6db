package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestCheckKubernetesVersion(t *testing.T) {
	table := SupportTable{Cloud: "Cloud", Rows: []SupportedMinor{
		{Minor: 34, EndOfSupport: Date(2027, 1, 1), Source: "https://example.test/34", Verified: true},
		{Minor: 35, EndOfSupport: Date(2027, 6, 30), Source: "https://example.test/35", Verified: true},
		{Minor: 36, EndOfSupport: Date(2027, 10, 31), Source: "https://example.test/36"},
		{Minor: 37, EndOfSupport: Date(2028, 2, 28), Source: "https://example.test/37", Verified: true},
	}}
	early, lastDay, dayAfter := Date(2026, 12, 5), Date(2027, 6, 30).Add(23*time.Hour), Date(2027, 7, 1)
	cases := []struct {
		name, version, minorOnly string
		now                      time.Time
		wantErr, wantWarning     string
	}{
		{name: "a supported minor", version: "1.35", now: early},
		{name: "a supported patch", version: "1.35.2", now: early},
		{name: "a GKE version", version: "1.36.1-gke.1000", now: early},
		{name: "a minor on its last day of support", version: "1.35", now: lastDay},
		{name: "below the floor, though the cloud still supports it", version: "1.34", now: early,
			wantErr: "must be 1.35 or later; Cloud supports 1.35, 1.36, 1.37 today"},
		{name: "a verified minor the day after its end of support", version: "1.35", now: dayAfter,
			wantErr: "left Cloud's support after 2027-06-30 (https://example.test/35); supported today: 1.36, 1.37"},
		{name: "an unverified minor past its date warns", version: "1.36", now: Date(2027, 11, 1),
			wantWarning: "given as 2027-10-31, now past; that date could not be verified (https://example.test/36)"},
		{name: "a minor newer than the table warns", version: "1.38", now: early,
			wantWarning: "v is 1.38, newer than the Cloud versions this release of gpu-tenancy knows (1.35, 1.36, 1.37)"},
		{name: "a table with every row past names the way out", version: "1.37", now: Date(2028, 3, 1),
			wantErr: "supported today: none (the table is out of date: upgrade gpu-tenancy)"},
		{name: "not a version", version: "latest", now: early, wantErr: "such as 1.35"},
		{name: "a patch where only a minor will do", version: "1.35.2", minorOnly: "while autoUpgrade.enabled is true", now: early,
			wantErr: "while autoUpgrade.enabled is true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := table.CheckKubernetesVersion(field.NewPath("v"), c.version, c.minorOnly, c.now)
			if c.wantErr == "" {
				assert.Empty(t, got.Errs)
			} else {
				assert.ErrorContains(t, got.Errs.ToAggregate(), c.wantErr)
			}
			if c.wantWarning == "" {
				assert.Empty(t, got.Warnings)
			} else if assert.Len(t, got.Warnings, 1) {
				assert.Contains(t, got.Warnings[0], c.wantWarning)
			}
		})
	}
}

func TestExtendedResourcesUnverified(t *testing.T) {
	table := SupportTable{Cloud: "Cloud", Rows: []SupportedMinor{
		{Minor: 35, EndOfSupport: Date(2027, 6, 30)},
		{Minor: 36, EndOfSupport: Date(2027, 10, 31)},
		{Minor: 37, EndOfSupport: Date(2028, 2, 28), ExtendedResources: "https://example.test/37-dra"},
	}}
	for _, c := range []struct {
		name, version string
		want          bool
	}{
		{"a minor before the feature, which validation refuses instead", "1.35", false},
		{"a row with no page that vouches for it", "1.36", true},
		{"a patch of such a row", "1.36.2-gke.100", true},
		{"a row whose page vouches for it", "1.37", false},
		{"a minor newer than the table", "1.38", true},
		{"not a version", "latest", false},
	} {
		t.Run(c.name, func(t *testing.T) { assert.Equal(t, c.want, table.ExtendedResourcesUnverified(c.version)) })
	}
}
