package gpureport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
)

// The JSON documents are an interface (docs/cli.md): these tests pin their shape, field by field.

func localStack(t *testing.T) Snapshot {
	s := cleanCluster(t)
	s.ResourceSlices = simulatedSlices()
	s.ResourceClaims = []resourcev1.ResourceClaim{
		allocate(claim(legalNS, "whole-a", now, "gpu-whole"), "gpu", "gpu-a100-whole-0", "gpu-0"),
		allocate(claim(legalNS, "whole-b", now, "gpu-whole"), "gpu", "gpu-a100-whole-1", "gpu-0"),
		claim(legalNS, "whole-c", now.Add(-5*time.Minute), "gpu-whole"),
	}
	s.ResourceQuotas[0] = quota(legalNS,
		map[string]int64{naming.DeviceQuotaKey("gpu-whole"): 3}, map[string]int64{naming.DeviceQuotaKey("gpu-whole"): 3})
	s.Pods = []corev1.Pod{unschedulable(pod(legalNS, "whole-c", now.Add(-5*time.Minute), "whole-c", ""), schedulerMessage)}
	return s
}

func render(t *testing.T, r Report, f Format) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Write(&b, r, f))
	return b.Bytes()
}

func TestCapacityJSON(t *testing.T) {
	s := localStack(t)
	out := render(t, Capacity(context.Background(), &s, now), JSON)
	assert.JSONEq(t, `{
		"apiVersion": "gpu-tenancy.io/v1alpha1",
		"kind": "CapacityReport",
		"generatedAt": "2026-11-30T12:00:00Z",
		"classes": [
			{"name": "gpu-slice", "tenants": ["research-ai"], "exist": 7, "allocated": 0, "unavailable": 0, "free": 7, "pools": [
				{"driver": "gpu.nvidia.com", "pool": "gpu-a100-mig-0", "node": "gpu-a100-mig-0", "exist": 7, "allocated": 0, "unavailable": 0, "free": 7}
			]},
			{"name": "gpu-whole", "tenants": ["legal-ai"], "exist": 2, "allocated": 2, "unavailable": 0, "free": 0, "pools": [
				{"driver": "gpu.nvidia.com", "pool": "gpu-a100-whole-0", "node": "gpu-a100-whole-0", "exist": 1, "allocated": 1, "unavailable": 0, "free": 0},
				{"driver": "gpu.nvidia.com", "pool": "gpu-a100-whole-1", "node": "gpu-a100-whole-1", "exist": 1, "allocated": 1, "unavailable": 0, "free": 0}
			]}
		],
		"tenants": [
			{"tenant": "legal-ai", "namespace": "vcluster-legal-ai", "class": "gpu-whole", "granted": true, "allocated": 2,
			 "requested": 3, "quota": 3, "pending": 1, "pendingPods": 0, "oldestPendingSeconds": 300},
			{"tenant": "research-ai", "namespace": "vcluster-research-ai", "class": "gpu-slice", "granted": true, "allocated": 0,
			 "requested": 0, "quota": 2, "pending": 0, "pendingPods": 0, "oldestPendingSeconds": 0}
		],
		"pools": [
			{"driver": "gpu.nvidia.com", "pool": "gpu-a100-mig-0", "node": "gpu-a100-mig-0", "generation": 1, "slices": 1, "incomplete": false,
			 "physicalGPUs": 1, "gpusInUse": 0, "devices": 7, "allocatedDevices": 0},
			{"driver": "gpu.nvidia.com", "pool": "gpu-a100-whole-0", "node": "gpu-a100-whole-0", "generation": 1, "slices": 1, "incomplete": false,
			 "physicalGPUs": 1, "gpusInUse": 1, "devices": 1, "allocatedDevices": 1},
			{"driver": "gpu.nvidia.com", "pool": "gpu-a100-whole-1", "node": "gpu-a100-whole-1", "generation": 1, "slices": 1, "incomplete": false,
			 "physicalGPUs": 1, "gpusInUse": 1, "devices": 1, "allocatedDevices": 1}
		]
	}`, string(out))
}

func TestPendingJSON(t *testing.T) {
	s := localStack(t)
	r := Pending(context.Background(), &s, now)
	r.MarkOverdue(time.Minute)
	assert.JSONEq(t, `{
		"apiVersion": "gpu-tenancy.io/v1alpha1",
		"kind": "PendingReport",
		"generatedAt": "2026-11-30T12:00:00Z",
		"olderThanSeconds": 60,
		"claims": [{
			"namespace": "vcluster-legal-ai", "tenant": "legal-ai", "claim": "whole-c", "pods": ["whole-c"], "classes": ["gpu-whole"],
			"since": "2026-11-30T11:55:00Z", "ageSeconds": 300, "overdue": true,
			"reasons": [{"kind": "Unschedulable", "message": "pod whole-c: `+schedulerMessage+`",
				"from": {"object": {"kind": "Pod", "namespace": "vcluster-legal-ai", "name": "whole-c"}, "tenantWritable": true}}]
		}]
	}`, string(render(t, r, JSON)))
}

func TestAuditJSON(t *testing.T) {
	s := localStack(t)
	s.LimitRanges = s.LimitRanges[1:]
	var doc map[string]any
	require.NoError(t, json.Unmarshal(render(t, Audit(&s, now), JSON), &doc))
	assert.Equal(t, "gpu-tenancy.io/v1alpha3", doc["apiVersion"])
	assert.Equal(t, "AuditReport", doc["kind"])
	assert.Equal(t, map[string]any{"tenants": []any{legal, research}, "deviceClasses": 2.0, "tenantClaims": 3.0, "vclusters": 2.0}, doc["scope"])
	require.Len(t, doc["findings"], 1)
	f := doc["findings"].([]any)[0].(map[string]any)
	assert.Equal(t, "LimitRangeMissing", f["check"])
	assert.Equal(t, legal, f["tenant"])
	assert.Equal(t, map[string]any{"kind": "LimitRange", "namespace": legalNS, "name": "container-defaults"}, f["object"])
	assert.Contains(t, f["fix"], "pulumi up --refresh")
	assert.NotEmpty(t, f["message"])
}

func TestYAMLSpellsFieldsAsJSON(t *testing.T) {
	s := localStack(t)
	r := Capacity(context.Background(), &s, now)
	var fromJSON, fromYAML map[string]any
	require.NoError(t, json.Unmarshal(render(t, r, JSON), &fromJSON))
	require.NoError(t, yaml.Unmarshal(render(t, r, YAML), &fromYAML))
	assert.Equal(t, fromJSON, fromYAML)
}

func TestTables(t *testing.T) {
	s := localStack(t)
	cases := []struct {
		name   string
		report Report
		lines  []string
	}{
		{"capacity lists classes, tenants and pools", Capacity(context.Background(), &s, now), []string{
			"CLASS      TENANTS      EXIST  ALLOCATED  UNAVAILABLE  FREE",
			"gpu-whole  legal-ai     2      2          0            0",
			"legal-ai     gpu-whole  yes      2          3          3      1        5m",
			"research-ai  gpu-slice  yes      0          0          2      0        -",
			"gpu-a100-mig-0    gpu-a100-mig-0    1           1     0            7        0          yes",
		}},
		{"pending shows claim, age and reason, with the object the reason is read from", Pending(context.Background(), &s, now), []string{
			"vcluster-legal-ai  legal-ai  whole-c  whole-c  gpu-whole  5m   Unschedulable [tenant-writable Pod whole-c]: pod whole-c: 0/5 nodes are available",
		}},
		{"pending names the author an event names", Pending(context.Background(), quotaRefused(t), now), []string{
			`QuotaExceeded [tenant-writable Event slice-c.1, reported by "resource_claim"]: PodResourceClaim gpu:`,
		}},
		{"a clean audit says what it checked", Audit(&s, now), []string{
			"audited 2 tenants, 2 DeviceClasses, 3 tenant claims, 2 vClusters: no findings.",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := string(render(t, tc.report, Table))
			for _, l := range tc.lines {
				assert.Contains(t, out, l)
			}
		})
	}
}

// quotaRefused is the local stack with research-ai's pod slice-c, whose claim the quota refused.
func quotaRefused(t *testing.T) *Snapshot {
	s := localStack(t)
	p := pod(researchNS, "slice-c", now, "", "slice")
	s.Pods = append(s.Pods, p)
	s.ClaimTemplates = append(s.ClaimTemplates, claimTemplate(researchNS, "slice", "gpu-slice"))
	s.Events = append(s.Events, failedCreation(p, quotaMessage))
	return &s
}

// forgedMessage is what a tenant may write into an event or a pod condition: escapes that clear the screen and home
// the cursor, a carriage return that overwrites the line, a C1 control sequence introducer, a DEL, and a
// right-to-left override that would show the rest of the row reversed.
const forgedMessage = "exceeded quota\x1b[2J\x1b[H\rQuotaExceeded: ask the platform team for 8 GPUs\u009b2K\x7f\u202e"

// controls lists the control characters of out but line feeds, and the bytes that are not UTF-8.
func controls(out []byte) []string {
	var found []string
	for len(out) > 0 {
		r, size := utf8.DecodeRune(out)
		if (r == utf8.RuneError && size == 1) || (unicode.IsControl(r) && r != '\n') {
			found = append(found, fmt.Sprintf("%q", out[:size]))
		}
		out = out[size:]
	}
	return found
}

func TestTenantTextCannotControlTheTerminal(t *testing.T) {
	s := quotaRefused(t)
	s.Events[0].Message = forgedMessage
	pending := Pending(context.Background(), s, now)
	audit := cleanCluster(t)
	// A selector key that would end the finding's message and start a forged fix on a line of its own.
	rerender(t, &audit, 0, map[string]any{"enabled": true, "selector": map[string]any{"matchLabels": map[string]any{
		"a\n    fix: kubectl delete namespace vcluster-research-ai\x1b[1A": "true"}}})
	cases := []struct {
		name   string
		report Report
		format Format
		check  func(t *testing.T, out []byte)
	}{
		{"the table writes each control as its escape", pending, Table, func(t *testing.T, out []byte) {
			assert.Contains(t, string(out), `exceeded quota\x1b[2J\x1b[H QuotaExceeded: ask the platform team for 8 GPUs\u009b2K\x7f\u202e`)
		}},
		{"the audit table keeps a quoted newline on the finding's line", Audit(&audit, now), Table, func(t *testing.T, out []byte) {
			assert.Equal(t, 1, strings.Count(string(out), "\n    fix: "), "%s", out)
			assert.Contains(t, string(out), `a fix: kubectl delete namespace vcluster-research-ai\x1b[1A=true`)
		}},
		{"JSON keeps the message as written", pending, JSON, func(t *testing.T, out []byte) {
			assert.Contains(t, string(out), `\u202e`, "a format character is escaped")
			var doc PendingReport
			require.NoError(t, json.Unmarshal(out, &doc))
			assert.Equal(t, forgedMessage, doc.Claims[1].Reasons[0].Message)
		}},
		{"YAML keeps the message as written", pending, YAML, func(t *testing.T, out []byte) {
			var doc PendingReport
			require.NoError(t, yaml.Unmarshal(out, &doc))
			assert.Equal(t, forgedMessage, doc.Claims[1].Reasons[0].Message)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := render(t, tc.report, tc.format)
			assert.Empty(t, controls(out), "%s", out)
			tc.check(t, out)
		})
	}
}

func TestParseFormat(t *testing.T) {
	for _, ok := range []string{"table", "json", "yaml"} {
		f, err := ParseFormat(ok)
		require.NoError(t, err)
		assert.Equal(t, Format(ok), f)
	}
	_, err := ParseFormat("xml")
	assert.EqualError(t, err, `output format "xml" is not one of table, json, yaml`)
}
