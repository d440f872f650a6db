package draplugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

func plugin(t *testing.T, pool string) *Plugin {
	devices, err := Devices(pool)
	require.NoError(t, err)
	p := &Plugin{Node: "node-a", Devices: map[string]resourceapi.Device{}, CDIDir: t.TempDir(), DevDir: t.TempDir()}
	for _, d := range devices {
		p.Devices[d.Name] = d
	}
	made := map[string]bool{}
	require.NoError(t, p.MakeDeviceNodes(func(path string, _, _ uint32) error {
		made[path] = true
		return os.WriteFile(path, nil, 0o666)
	}))
	require.True(t, made[filepath.Join(p.DevDir, "nvidiactl")], "the common nodes are made")
	return p
}

func claim(uid string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results}}},
	}
}

func result(pool, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: "gpu", Driver: simhw.Driver, Pool: pool, Device: device}
}

func prepare(t *testing.T, p *Plugin, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	out, err := p.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	require.NoError(t, err)
	return out[c.UID]
}

func TestPrepareWritesTheClaimsSpecAndReturnsItsDeviceIDs(t *testing.T) {
	p := plugin(t, simhw.PoolWhole)
	res := prepare(t, p, claim("u1", result("node-a", "gpu-0")))
	require.NoError(t, res.Err)
	require.Equal(t, []kubeletplugin.Device{{Requests: []string{"gpu"}, PoolName: "node-a", DeviceName: "gpu-0",
		CDIDeviceIDs: []string{"k8s.gpu.nvidia.com/claim=u1-gpu-0"}}}, res.Devices)
	data, err := os.ReadFile(filepath.Join(p.CDIDir, "k8s.gpu.nvidia.com-claim_u1.yaml"))
	require.NoError(t, err)
	var spec cdiSpec
	require.NoError(t, json.Unmarshal(data, &spec))
	assert.Equal(t, "k8s.gpu.nvidia.com/claim", spec.Kind)
	assert.Equal(t, []string{"NVIDIA_VISIBLE_DEVICES=void"}, spec.Edits.Env)
	require.Len(t, spec.Devices, 1)
	assert.Equal(t, "u1-gpu-0", spec.Devices[0].Name)
	assert.Equal(t, []cdiDeviceNode{{Path: "/dev/nvidia0", HostPath: filepath.Join(p.DevDir, "nvidia0")}},
		spec.Devices[0].Edits.DeviceNodes)
	uuid, err := os.ReadFile(spec.Devices[0].Edits.Mounts[0].HostPath)
	require.NoError(t, err)
	assert.Equal(t, *p.Devices["gpu-0"].Attributes["uuid"].StringValue+"\n", string(uuid))
}

func TestAMIGDeviceGetsItsParentAndItsCapabilityNodes(t *testing.T) {
	p := plugin(t, simhw.PoolMIG)
	res := prepare(t, p, claim("u2", result("node-a", "gpu-0-mig-1g5gb-19-3")))
	require.NoError(t, res.Err)
	data, err := os.ReadFile(filepath.Join(p.CDIDir, "k8s.gpu.nvidia.com-claim_u2.yaml"))
	require.NoError(t, err)
	var spec cdiSpec
	require.NoError(t, json.Unmarshal(data, &spec))
	var paths []string
	for _, n := range spec.Devices[0].Edits.DeviceNodes {
		paths = append(paths, n.Path)
	}
	assert.Equal(t, []string{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap16", "/dev/nvidia-caps/nvidia-cap17"}, paths)
}

func TestPrepareSkipsOtherNodesDevicesAndRefusesUnknownOnes(t *testing.T) {
	p := plugin(t, simhw.PoolWhole)
	res := prepare(t, p, claim("u3", result("node-b", "gpu-0")))
	require.NoError(t, res.Err)
	assert.Empty(t, res.Devices, "a device of another node's pool is not this plugin's")
	assert.NoFileExists(t, filepath.Join(p.CDIDir, "k8s.gpu.nvidia.com-claim_u3.yaml"), "a spec without devices is invalid")
	res = prepare(t, p, claim("u4", result("node-a", "gpu-7")))
	assert.ErrorContains(t, res.Err, `device "gpu-7" is not on node node-a`)
	res = prepare(t, p, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: "u5"}})
	assert.ErrorContains(t, res.Err, "not allocated")
}

func TestUnprepareRemovesTheSpecAndToleratesAClaimNeverPrepared(t *testing.T) {
	p := plugin(t, simhw.PoolWhole)
	require.NoError(t, prepare(t, p, claim("u6", result("node-a", "gpu-0"))).Err)
	out, err := p.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{UID: "u6"}, {UID: "never"}})
	require.NoError(t, err)
	assert.NoError(t, out["u6"])
	assert.NoError(t, out["never"])
	assert.NoFileExists(t, filepath.Join(p.CDIDir, "k8s.gpu.nvidia.com-claim_u6.yaml"))
}
