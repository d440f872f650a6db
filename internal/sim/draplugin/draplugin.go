// Package draplugin is a simulated NVIDIA DRA kubelet plugin for the local stack's real nodes: it publishes a node's
// GPUs in the NVIDIA driver's shapes (the devices of internal/sim/simhw's fixtures, which cite the driver's sources)
// and prepares claims the way the driver does, through CDI: one spec per claim whose edits give the container the
// driver's common device nodes and variables and each allocated device's own nodes (stand-in character devices here),
// and the spec's device IDs returned to the kubelet, which hands them to containerd. So a container sees a GPU only
// when its claim was allocated one, injected by the runtime, never by the pod spec.
//
// What the driver does, read in kubernetes-sigs/dra-driver-nvidia-gpu v0.4.0: cmd/gpu-kubelet-plugin/cdi.go (the
// spec's kind, file name and device names), device_state.go (one CDI device ID per allocated device), and the
// nvidia-container-toolkit v1.19.0 it vendors, pkg/nvcdi/common-nvml.go (the common device nodes) and wrapper.go
// (NVIDIA_VISIBLE_DEVICES=void). One thing is the simulation's own: the real container learns a device's UUID from the
// driver (NVML, nvidia-smi -L), which is not here, so each device's edits also mount a file holding its UUID at
// /run/nvidia-sim/<device>/uuid, for the GPU probe to print.
package draplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"

	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// CDI names of the driver's claim devices (dra-driver-nvidia-gpu v0.4.0 cmd/gpu-kubelet-plugin/cdi.go: cdiVendor
// "k8s." + DriverName, cdiClaimClass "claim").
const (
	CDIVendor = "k8s." + simhw.Driver
	CDIClass  = "claim"
	CDIKind   = CDIVendor + "/" + CDIClass
)

// commonNodes are the device nodes every claim's spec gives its containers (nvidia-container-toolkit v1.19.0
// pkg/nvcdi/common-nvml.go).
var commonNodes = []string{"nvidia-modeset", "nvidia-uvm-tools", "nvidia-uvm", "nvidiactl"}

// Devices are the devices of pool's simulated node 0 in the fixtures, the GPUs one node of that pool has.
func Devices(pool string) ([]resourceapi.Device, error) {
	hw, err := simhw.Load()
	if err != nil {
		return nil, err
	}
	node := "gpu-" + pool + "-0"
	for _, s := range hw.Slices {
		if ptr.Deref(s.Spec.NodeName, "") == node {
			return s.Spec.Devices, nil
		}
	}
	return nil, fmt.Errorf("no simulated hardware for pool %q (internal/sim/simhw/hardware)", pool)
}

// Plugin prepares claims of devices on one node.
type Plugin struct {
	// Node is the node's name: the pool its devices are published in.
	Node string
	// Devices are the node's devices, by name.
	Devices map[string]resourceapi.Device
	// CDIDir is where containerd reads CDI specs (its cdi_spec_dirs).
	CDIDir string
	// DevDir holds the stand-in device nodes the specs point at.
	DevDir string

	mu sync.Mutex
}

var _ kubeletplugin.DRAPlugin = (*Plugin)(nil)

// gpuName and migName are the driver's device names: gpu-<minor> for a whole GPU, gpu-<parent minor>-mig-<profile>-
// <GI profile id>-<placement> for a MIG device (dra-driver-nvidia-gpu v0.4.0 cmd/gpu-kubelet-plugin/deviceinfo.go).
var (
	gpuName = regexp.MustCompile(`^gpu-(\d+)$`)
	migName = regexp.MustCompile(`^gpu-(\d+)-mig-[0-9a-z]+-(\d+)-(\d+)$`)
)

// deviceNodes are a device's own character devices: a GPU's /dev/nvidia<minor>; a MIG device's parent GPU's, and
// the capability nodes of its GPU instance and compute instance (dra-driver-nvidia-gpu v0.4.0
// cmd/gpu-kubelet-plugin/cdi.go, which takes the parent's spec and adds GetDevNodesForMigDevice's
// /dev/nvidia-caps/nvidia-cap<minor>; the real minors come from /proc/driver/nvidia/capabilities, here one pair per
// placement).
func deviceNodes(device string) ([]string, error) {
	if m := gpuName.FindStringSubmatch(device); m != nil {
		return []string{"nvidia" + m[1]}, nil
	}
	if m := migName.FindStringSubmatch(device); m != nil {
		placement, _ := strconv.Atoi(m[3])
		return []string{"nvidia" + m[1], fmt.Sprintf("nvidia-caps/nvidia-cap%d", 10+2*placement),
			fmt.Sprintf("nvidia-caps/nvidia-cap%d", 11+2*placement)}, nil
	}
	return nil, fmt.Errorf("device %q is neither a GPU nor a MIG device of the driver's names", device)
}

// MakeDeviceNodes creates the stand-in character devices under DevDir: the numbers of /dev/null, which any container
// may open, so what a test sees is which nodes a container was given, not what they do.
func (p *Plugin) MakeDeviceNodes(mknod func(path string, major, minor uint32) error) error {
	for name, dev := range p.Devices {
		nodes, err := deviceNodes(name)
		if err != nil {
			return err
		}
		if err := writeAtomic(p.uuidFile(name), []byte(uuid(dev)+"\n")); err != nil {
			return err
		}
		for _, n := range append(nodes, commonNodes...) {
			path := filepath.Join(p.DevDir, n)
			if _, err := os.Stat(path); err == nil {
				continue
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			if err := mknod(path, 1, 3); err != nil {
				return fmt.Errorf("stand-in device %s: %w", path, err)
			}
		}
	}
	return nil
}

// cdiSpec is the part of a CDI spec (cncf-tags/container-device-interface SPEC.md, version 0.6.0) the driver writes.
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
	Edits   cdiEdits    `json:"containerEdits"`
}

type cdiDevice struct {
	Name  string   `json:"name"`
	Edits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env         []string        `json:"env,omitempty"`
	DeviceNodes []cdiDeviceNode `json:"deviceNodes,omitempty"`
	Mounts      []cdiMount      `json:"mounts,omitempty"`
}

type cdiMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Options       []string `json:"options"`
}

type cdiDeviceNode struct {
	Path     string `json:"path"`
	HostPath string `json:"hostPath"`
}

// specPath is the claim's spec file, one per claim, named as the CDI library names a transient spec
// (vendor-class_id): unpreparing removes exactly what preparing wrote. JSON, which a YAML reader takes.
func (p *Plugin) specPath(claim types.UID) string {
	return filepath.Join(p.CDIDir, fmt.Sprintf("%s-%s_%s.yaml", CDIVendor, CDIClass, claim))
}

// uuidFile holds a device's UUID, the simulation's stand-in for asking the driver.
func (p *Plugin) uuidFile(device string) string {
	return filepath.Join(p.DevDir, "uuid", device)
}

// PrepareResourceClaims writes each claim's CDI spec, for the devices allocated to it on this node, and returns their
// IDs. Preparing again writes the same spec, so a claim stays prepared across restarts of the plugin and the kubelet.
func (p *Plugin) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		res, err := p.prepare(claim)
		if err != nil {
			res = kubeletplugin.PrepareResult{Err: fmt.Errorf("claim %s/%s: %w", claim.Namespace, claim.Name, err)}
		}
		klog.FromContext(ctx).Info("prepared", "claim", klog.KObj(claim), "devices", len(res.Devices), "err", res.Err)
		out[claim.UID] = res
	}
	return out, nil
}

func (p *Plugin) prepare(claim *resourceapi.ResourceClaim) (kubeletplugin.PrepareResult, error) {
	var res kubeletplugin.PrepareResult
	if claim.Status.Allocation == nil {
		return res, fmt.Errorf("not allocated")
	}
	spec := cdiSpec{Version: "0.6.0", Kind: CDIKind, Edits: cdiEdits{Env: []string{"NVIDIA_VISIBLE_DEVICES=void"}}}
	for _, n := range commonNodes {
		spec.Edits.DeviceNodes = append(spec.Edits.DeviceNodes, p.deviceNode(n))
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != simhw.Driver || r.Pool != p.Node {
			continue
		}
		dev, ok := p.Devices[r.Device]
		if !ok {
			return res, fmt.Errorf("device %q is not on node %s", r.Device, p.Node)
		}
		nodes, err := deviceNodes(r.Device)
		if err != nil {
			return res, err
		}
		name := fmt.Sprintf("%s-%s", claim.UID, r.Device)
		edits := cdiEdits{Mounts: []cdiMount{{HostPath: p.uuidFile(dev.Name),
			ContainerPath: "/run/nvidia-sim/" + dev.Name + "/uuid", Options: []string{"ro", "bind"}}}}
		for _, n := range nodes {
			edits.DeviceNodes = append(edits.DeviceNodes, p.deviceNode(n))
		}
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, Edits: edits})
		res.Devices = append(res.Devices, kubeletplugin.Device{
			Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device,
			CDIDeviceIDs: []string{CDIKind + "=" + name},
		})
	}
	if len(spec.Devices) == 0 {
		// No device of this node: no spec (CDI refuses a spec without devices), and none left from before.
		if err := os.Remove(p.specPath(claim.UID)); err != nil && !os.IsNotExist(err) {
			return res, err
		}
		return res, nil
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return res, err
	}
	if err := writeAtomic(p.specPath(claim.UID), data); err != nil {
		return res, err
	}
	return res, nil
}

func (p *Plugin) deviceNode(name string) cdiDeviceNode {
	return cdiDeviceNode{Path: "/dev/" + name, HostPath: filepath.Join(p.DevDir, name)}
}

func uuid(dev resourceapi.Device) string {
	if a, ok := dev.Attributes["uuid"]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return dev.Name
}

// writeAtomic replaces path in one rename, so containerd never reads half a spec.
func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// UnprepareResourceClaims removes each claim's spec; a claim never prepared here is no error.
func (p *Plugin) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	for _, c := range claims {
		err := os.Remove(p.specPath(c.UID))
		if os.IsNotExist(err) {
			err = nil
		}
		klog.FromContext(ctx).Info("unprepared", "claim", c.NamespacedName, "err", err)
		out[c.UID] = err
	}
	return out, nil
}

// HandleError logs what the plugin library could not do in the background (publishing slices).
func (p *Plugin) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
}

// ProbeImage is the GPU probe's image on the local stack's nodes (scripts/tools/nodeimages/images.lock).
const ProbeImage = "localhost/gpu-tenancy/gpu-probe:local"

// GPUWorkload is what a test or the benchmark applies to run the GPU probe on a device of the plugin's type (gpu or
// mig): a DeviceClass selecting that type of the driver's devices, a claim template asking one of the class, and a pod
// named name in namespace whose container "with" holds the claim and, when without, whose container "without" holds
// none. The pod tolerates the GPU nodes' taint.
func GPUWorkload(namespace, name, deviceType string, without bool) (*resourceapi.DeviceClass, *resourceapi.ResourceClaimTemplate, *corev1.Pod) {
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "sim-" + deviceType},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].type == %q`, simhw.Driver,
				simhw.Driver, deviceType),
		}}}},
	}
	template := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class.Name}}},
		}}},
	}
	containers := []corev1.Container{{Name: "with", Image: ProbeImage, ImagePullPolicy: corev1.PullNever,
		Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}
	if without {
		containers = append(containers, corev1.Container{Name: "without", Image: ProbeImage, ImagePullPolicy: corev1.PullNever})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			Tolerations:    []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(name)}},
			Containers:     containers,
		},
	}
	return class, template, pod
}
