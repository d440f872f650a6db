// Package nodes starts the local control plane with real nodes (scripts/local-cluster.sh with GT_NODES,
// scripts/local-nodes.sh) and checks that pods run on them, across nodes, and that `down` gives the host back as it
// was. It needs root, as the nodes do; `make test` runs as root.
package nodes

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/draplugin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The nodes of the test cluster: one without GPUs, and one per GPU pool of the local stack (stacks/Pulumi.local.yaml).
var pools = []string{"system", "a100-whole", "a100-mig"}

// Ports apart from the demo's cluster and the end-to-end shards' (tests/e2e/main_test.go), and below the kernel's
// ephemeral range, which scripts/local-cluster.sh refuses.
var clusterEnv = []string{"GT_ETCD_PORT=24790", "GT_ETCD_PEER_PORT=24800", "GT_APISERVER_PORT=24443",
	"GT_KCM_PORT=24257", "GT_SCHEDULER_PORT=24259", "GT_NODES=" + strings.Join(pools, " "),
	"GT_NODE_REGISTRY_PORT=" + privateRegistryPort}

const (
	busybox  = "localhost/gpu-tenancy/busybox:local"
	gpuTaint = "nvidia.com/gpu"
)

type cluster struct {
	root, dir string
	client    kubernetes.Interface
	config    *rest.Config
}

// asRoot skips the test under -short, saying what it does, requires root, as the nodes do (namespaces, bridges,
// cgroups), and returns the repository's root.
func asRoot(t *testing.T, does string) string {
	t.Helper()
	if testing.Short() {
		t.Skip(does)
	}
	require.Zero(t, os.Geteuid(), "needs root: run as root, as make test does")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}

func (c *cluster) script(t *testing.T, verb string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := localcluster.Run(ctx, c.root, c.dir, verb, append(os.Environ(), clusterEnv...), &out)
	require.NoError(t, err, out.String())
	return out.String()
}

func TestPodsRunOnRealNodesAndDownLeavesTheHostAsItWas(t *testing.T) {
	root := asRoot(t, "starts a control plane and real nodes")
	for _, tool := range []string{"bin/kubelet", "bin/containerd", "bin/kube-proxy", "nodeimages/pause", "nodeimages/registry"} {
		_, err := os.Stat(filepath.Join(root, ".tools", tool))
		require.NoError(t, err, "%s is not built: run `make tools` (make test does)", tool)
	}
	c := &cluster{root: root, dir: t.TempDir()}
	before := hostState(t, root, c.dir)
	down := false
	t.Cleanup(func() {
		if !down {
			c.script(t, "purge")
		}
	})
	c.script(t, "up")
	var err error
	c.config, err = clientcmd.BuildConfigFromFlags("", filepath.Join(c.dir, "kubeconfig"))
	require.NoError(t, err)
	c.client, err = kubernetes.NewForConfig(c.config)
	require.NoError(t, err)

	t.Run("every node is Ready with its pool's labels and taint", func(t *testing.T) { c.checkNodes(t) })
	t.Run("pods run on every node and reach each other, Services and the API server", func(t *testing.T) {
		c.checkPods(t)
	})
	t.Run("a GPU pod sees exactly its claim's devices, injected by the runtime through CDI", func(t *testing.T) {
		c.checkGPUs(t)
	})
	t.Run("the default StorageClass provisions a volume that a pod not running as root writes", func(t *testing.T) {
		c.checkStorage(t)
	})
	t.Run("each tenant's vCluster runs, answers its own tenant only and runs its pods", func(t *testing.T) {
		c.checkTenants(t)
	})
	t.Run("status names a stopped part and up restarts it", func(t *testing.T) { c.checkStatus(t) })

	c.script(t, "down")
	down = true
	after := hostState(t, root, c.dir)
	assert.Equal(t, before, after, "the host after down differs from before up")
	c.script(t, "purge")
	_, err = os.Stat(filepath.Join(c.dir, "nodes"))
	assert.True(t, os.IsNotExist(err), "purge leaves the nodes' directories: %v", err)
}

func (c *cluster) checkNodes(t *testing.T) {
	ctx := context.Background()
	require.Empty(t, c.pressure(), "a node under pressure is tainted, and no pod is scheduled there")
	for i, pool := range pools {
		node, err := c.client.CoreV1().Nodes().Get(ctx, fmt.Sprintf("%s-%d", pool, i), metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, ready(node), "%s is not Ready: %v", node.Name, node.Status.Conditions)
		assert.Equal(t, "v1.36.3", node.Status.NodeInfo.KubeletVersion, node.Name)
		assert.Equal(t, "containerd://2.4.2", node.Status.NodeInfo.ContainerRuntimeVersion, node.Name)
		tainted := slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == gpuTaint && t.Value == "present" && t.Effect == corev1.TaintEffectNoSchedule
		})
		if pool == "system" {
			assert.False(t, tainted, "the system node carries the GPU taint")
			assert.NotContains(t, node.Labels, "gpu-tenancy.io/pool")
			continue
		}
		assert.True(t, tainted, "%s lacks its pool's taint: %v", node.Name, node.Spec.Taints)
		assert.Equal(t, pool, node.Labels["gpu-tenancy.io/pool"], node.Name)
		assert.Equal(t, "true", node.Labels["nvidia.com/gpu.present"], node.Name)
	}
}

func ready(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pod is a busybox pod for one node, running a shell command.
func pod(name, node, command string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			// Placed by the scheduler, which a node's taints and readiness gate.
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Tolerations:  []corev1.Toleration{{Key: gpuTaint, Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "main", Image: busybox, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", command},
			}},
		},
	}
}

func (c *cluster) checkPods(t *testing.T) {
	ctx := context.Background()
	pods := c.client.CoreV1().Pods("default")
	// One web server per node, each answering with its node's name, and one client on the first node.
	var webs []*corev1.Pod
	for i, pool := range pools {
		node := fmt.Sprintf("%s-%d", pool, i)
		p := pod("web-"+node, node,
			"mkdir -p /tmp/www && echo served-by-$NODE > /tmp/www/index.html && echo web up on $NODE && exec httpd -f -p 8080 -h /tmp/www")
		p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "NODE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}
		created, err := pods.Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		webs = append(webs, created)
	}
	client := fmt.Sprintf("%s-%d", pools[0], 0)
	_, err := pods.Create(ctx, pod("client", client, "exec sleep 3600"), metav1.CreateOptions{})
	require.NoError(t, err)
	for i, w := range append(webs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"}}) {
		running := c.waitRunning(t, w.Name)
		if i < len(webs) {
			webs[i] = running
		}
	}

	for _, w := range webs {
		node := w.Spec.NodeName
		assert.Equal(t, "web up on "+node+"\n", c.logs(t, "default", w.Name, ""))
		out, err := c.exec(t, "client", "wget", "-qO-", "http://"+w.Status.PodIP+":8080")
		require.NoError(t, err, "client on %s to pod %s on %s: %s", client, w.Status.PodIP, node, out)
		assert.Equal(t, "served-by-"+node+"\n", out)

		svc, err := c.client.CoreV1().Services("default").Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: w.Name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": w.Name},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		// kube-proxy programs the Service once its EndpointSlice is there.
		var last string
		err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			last, err = c.exec(t, "client", "wget", "-qO-", "http://"+svc.Spec.ClusterIP)
			return err == nil, nil
		})
		require.NoError(t, err, "client to Service %s (%s) of a pod on %s: %s", svc.Name, svc.Spec.ClusterIP, node, last)
		assert.Equal(t, "served-by-"+node+"\n", last)
	}
	// The API server behind the kubernetes Service, through kube-proxy's rules to the bridge address, with the pod's
	// own service-account token.
	out, err := c.exec(t, "client", "podcheck", "get", "https://10.0.0.1/version")
	require.NoError(t, err, "client to the kubernetes Service: %s", out)
	assert.Contains(t, out, `"gitVersion": "v1.36.3"`)
	// A port nothing listens on is refused, so the checks above can fail.
	out, err = c.exec(t, "client", "podcheck", "dial", webs[1].Status.PodIP+":8081")
	assert.Error(t, err, "a closed port answered: %s", out)
}

func (c *cluster) waitRunning(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	return c.waitRunningIn(t, "default", name)
}

// waitRunningIn is waitRunning of a pod of another namespace.
func (c *cluster) waitRunningIn(t *testing.T, namespace, name string) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true,
		func(ctx context.Context) (bool, error) {
			var err error
			p, err = c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return p.Status.Phase == corev1.PodRunning, nil
		})
	require.NoError(t, err, "pod %s never ran: %+v%s", name, p.Status, c.pressure())
	return p
}

// pressure names the nodes under resource pressure, which taints them so that nothing is scheduled there: the host's
// disk below the kubelet's eviction threshold (scripts/local-nodes.sh evictionHard) is the usual cause on a machine
// that keeps build caches.
func (c *cluster) pressure() string {
	nodes, err := c.client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return ""
	}
	var out []string
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type != corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				out = append(out, fmt.Sprintf("%s: %s (%s)", n.Name, cond.Type, cond.Message))
			}
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "\nnodes under pressure: " + strings.Join(out, "; ")
}

// exec runs a command in a pod's container through the API server and the kubelet, as kubectl exec does.
func (c *cluster) exec(t *testing.T, pod string, command ...string) (string, error) {
	t.Helper()
	return c.execIn("default", pod, command...)
}

// kill SIGKILLs one part of a node, as its pid file names it, and waits until it is gone.
func (c *cluster) kill(t *testing.T, node, part string) {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(c.dir, "run", node+"."+part+".pid"))
	require.NoError(t, err)
	require.NoError(t, exec.Command("kill", "-KILL", strings.TrimSpace(string(pid))).Run())
	require.Eventually(t, func() bool {
		_, err := os.Stat("/proc/" + strings.TrimSpace(string(pid)))
		return os.IsNotExist(err)
	}, 10*time.Second, 100*time.Millisecond, "%s.%s survived SIGKILL", node, part)
}

func (c *cluster) checkStatus(t *testing.T) {
	out := c.script(t, "status")
	for i, pool := range pools {
		parts := []string{"holder", "containerd", "kubelet", "kube-proxy", "network-policy"}
		if pool != "system" {
			parts = append(parts, "dra-plugin")
		}
		for _, part := range parts {
			assert.Regexp(t, fmt.Sprintf(`(?m)^%s-%d\.%s +running`, pool, i, part), out)
		}
		assert.Regexp(t, fmt.Sprintf(`(?m)^%s-%d +Ready$`, pool, i), out)
	}
	c.kill(t, "a100-mig-2", "kube-proxy")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var buf bytes.Buffer
	err := localcluster.Run(ctx, c.root, c.dir, "status", append(os.Environ(), clusterEnv...), &buf)
	assert.Error(t, err, "status exits 0 with a part down:\n%s", buf.String())
	assert.Regexp(t, `(?m)^a100-mig-2\.kube-proxy +CRASHED`, buf.String())
	assert.Contains(t, buf.String(), "last lines of", "status shows the dead part's log")
	c.script(t, "up")
	assert.Regexp(t, `(?m)^a100-mig-2\.kube-proxy +running`, c.script(t, "status"))
}

// gpuPod applies draplugin.GPUWorkload for one device of deviceType.
func (c *cluster) gpuPod(t *testing.T, name, deviceType string, without bool) {
	ctx := context.Background()
	class, template, pod := draplugin.GPUWorkload("default", name, deviceType, without)
	_, err := c.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, template, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
}

// allocated is the device the scheduler gave a pod's claim, the claim's UID, and the device as its node's plugin
// published it.
func (c *cluster) allocated(t *testing.T, pod *corev1.Pod) (resourcev1.DeviceRequestAllocationResult, string, resourcev1.Device) {
	ctx := context.Background()
	require.Len(t, pod.Status.ResourceClaimStatuses, 1)
	claim, err := c.client.ResourceV1().ResourceClaims("default").Get(ctx, *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, claim.Status.Allocation)
	require.Len(t, claim.Status.Allocation.Devices.Results, 1)
	result := claim.Status.Allocation.Devices.Results[0]
	assert.Equal(t, pod.Spec.NodeName, result.Pool, "the device is not from the pod's node")
	return result, string(claim.UID), c.publishedDevice(t, ctx, pod.Spec.NodeName, result)
}

// logs is what a probe container printed. A pod is Running once its containers have started, which can be before
// the probe's first line reaches its log, so it waits for the log to be written and to hold still for a poll.
func (c *cluster) logs(t *testing.T, namespace, pod, container string) string {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, false,
		func(ctx context.Context) (bool, error) {
			out, err := c.client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
			if err != nil {
				return false, err
			}
			done := len(out) > 0 && string(out) == last
			last = string(out)
			return done, nil
		})
	require.NoError(t, err, "logs of %s/%s: %q", pod, container, last)
	return last
}

func (c *cluster) checkGPUs(t *testing.T) {
	c.gpuPod(t, "whole", "gpu", true)
	c.gpuPod(t, "mig", "mig", false)
	whole, mig := c.waitRunning(t, "whole"), c.waitRunning(t, "mig")
	assert.Equal(t, "a100-whole-1", whole.Spec.NodeName)
	assert.Equal(t, "a100-mig-2", mig.Spec.NodeName)

	result, claimUID, device := c.allocated(t, whole)
	uuid := *device.Attributes["uuid"].StringValue
	require.Equal(t, "gpu-0", result.Device)
	// The driver's common nodes and variable, the GPU's own node, and its UUID.
	assert.Equal(t, "device: /dev/nvidia-modeset\ndevice: /dev/nvidia-uvm\ndevice: /dev/nvidia-uvm-tools\n"+
		"device: /dev/nvidia0\ndevice: /dev/nvidiactl\nuuid: "+uuid+"\nenv: NVIDIA_VISIBLE_DEVICES=void\n",
		c.logs(t, "default", "whole", "with"))
	assert.Equal(t, "devices: none\n", c.logs(t, "default", "whole", "without"), "a container without the claim sees a GPU")

	_, _, migDevice := c.allocated(t, mig)
	migLog := c.logs(t, "default", "mig", "with")
	assert.Equal(t, "mig", *migDevice.Attributes["type"].StringValue)
	assert.Contains(t, migLog, "uuid: "+*migDevice.Attributes["uuid"].StringValue+"\n")
	assert.Contains(t, migLog, "device: /dev/nvidia0\n", "a MIG device's container sees its parent GPU")
	assert.Equal(t, 2, strings.Count(migLog, "device: /dev/nvidia-caps/nvidia-cap"), migLog)

	// The claim stays prepared while the plugin and the kubelet restart: the pod's containers keep running and
	// the claim's CDI spec stays where containerd reads it.
	spec := filepath.Join(c.dir, "nodes", "a100-whole-1", "root", "run", "cdi", "k8s.gpu.nvidia.com-claim_"+claimUID+".yaml")
	require.FileExists(t, spec)
	c.kill(t, "a100-whole-1", "dra-plugin")
	c.kill(t, "a100-whole-1", "kubelet")
	c.script(t, "up")
	require.FileExists(t, spec)
	// up returned once the new kubelet reported the node Ready; give it a few syncs of the pod.
	assert.Never(t, func() bool {
		after := c.waitRunning(t, "whole")
		for i, s := range after.Status.ContainerStatuses {
			if s.RestartCount > 0 || s.ContainerID != whole.Status.ContainerStatuses[i].ContainerID {
				return true
			}
		}
		return false
	}, 15*time.Second, time.Second, "a container of the GPU pod restarted with the kubelet or the plugin")

	// Deleting the pod unprepares its claim through the restarted plugin.
	require.NoError(t, c.client.CoreV1().Pods("default").Delete(context.Background(), "whole", metav1.DeleteOptions{}))
	assert.Eventually(t, func() bool {
		_, err := os.Stat(spec)
		return os.IsNotExist(err)
	}, 2*time.Minute, time.Second, "the claim's CDI spec outlived its pod")
}
