package gpureport

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

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
			 "requested": 3, "quota": 3, "pending": 1, "oldestPendingSeconds": 300},
			{"tenant": "research-ai", "namespace": "vcluster-research-ai", "class": "gpu-slice", "granted": true, "allocated": 0,
			 "requested": 0, "quota": 2, "pending": 0, "oldestPendingSeconds": 0}
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
			"reasons": [{"kind": "Unschedulable", "message": "pod whole-c: `+schedulerMessage+`"}]
		}]
	}`, string(render(t, r, JSON)))
}

func TestAuditJSON(t *testing.T) {
	s := localStack(t)
	s.LimitRanges = s.LimitRanges[1:]
	var doc map[string]any
	require.NoError(t, json.Unmarshal(render(t, Audit(&s, now), JSON), &doc))
	assert.Equal(t, "gpu-tenancy.io/v1alpha2", doc["apiVersion"])
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
		{"pending shows claim, age and reason", Pending(context.Background(), &s, now), []string{
			"vcluster-legal-ai  legal-ai  whole-c  whole-c  gpu-whole  5m   Unschedulable: pod whole-c: 0/5 nodes are available",
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

func TestParseFormat(t *testing.T) {
	for _, ok := range []string{"table", "json", "yaml"} {
		f, err := ParseFormat(ok)
		require.NoError(t, err)
		assert.Equal(t, Format(ok), f)
	}
	_, err := ParseFormat("xml")
	assert.EqualError(t, err, `output format "xml" is not one of table, json, yaml`)
}
