package nodes

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/utils/ptr"
)

// A link-local address that is no metadata endpoint: the node-local DNS cache's, which tenant egress must keep
// (components/tenancy/network.go MetadataCIDRs).
const nodeLocalAddress = "169.254.20.10"

// refused is how a connection the enforcer rejects ends (kube-router v2.1.0 pkg/controllers/netpol/pod.go: REJECT,
// which answers with an ICMP port unreachable).
const refused = "connection refused"

// checkNetworkPolicy sends packets where the platform's NetworkPolicies say they may and may not go, on the real
// nodes, where each node's enforcer (scripts/local-nodes.sh) applies them: within a tenant's namespace they pass, to
// its pods and its vCluster's API; from another tenant, from a namespace of no tenant and from the machine (but to the
// vCluster API) they are refused; a tenant's egress reaches a link-local address but no metadata endpoint, on its own
// node or across the bridge. Each refusal has a control that shows the listener answers someone else.
func (c *cluster) checkNetworkPolicy(t *testing.T, ctx context.Context, clients map[string]*rest.Config) {
	legal, research := "legal-ai", "research-ai"
	web := c.runThroughVCluster(t, ctx, legal, clients[legal], "np-web",
		"mkdir -p /tmp/www && echo np-web > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www")
	own := c.runThroughVCluster(t, ctx, legal, clients[legal], "np-client", "exec sleep 3600")
	other := c.runThroughVCluster(t, ctx, research, clients[research], "np-client", "exec sleep 3600")
	// The tenants' pods go wherever the scheduler puts them (their vCluster gives them the GPU nodes' toleration): the
	// pod of no tenant, the listeners and their addresses follow the tenant's client, so that every verdict is about
	// the same path as its control's, and no packet finds its way out of the machine instead of to a listener.
	clientNode := own.Spec.NodeName
	outsiders := map[string]string{"np-outsider": clientNode}
	// Pods of no tenant beside the tenant's web pod and on another node: the enforcer filters traffic between pods of
	// one node where the bridge hands it over, and traffic between nodes where the node routes it; both are checked,
	// wherever the scheduler put the web pod.
	outsiders["np-beside-web"] = web.Spec.NodeName
	outsiders["np-across-web"] = otherNode(web.Spec.NodeName)
	running := map[string]*corev1.Pod{}
	for name, node := range outsiders {
		_, err := c.client.CoreV1().Pods("default").Create(ctx, pod(name, node, "exec sleep 3600"), metav1.CreateOptions{})
		require.NoError(t, err)
		running[name] = c.waitRunning(t, name)
		require.Equal(t, node, running[name].Spec.NodeName)
	}
	outsider := running["np-outsider"]

	// Listeners at metadata endpoints' addresses, inside the nodes' own network namespaces (down removes them with the
	// nodes): a host-network pod on each of two nodes, with the addresses on the node's loopback. GKE's at the client's
	// own node, as GKE's metadata server answers on every node; Scaleway's at another node, routed there by the
	// client's node, so that the packets cross the bridge as they leave a cloud's node; and a link-local address that
	// is no metadata endpoint, which tenant egress keeps.
	gke, scaleway := strings.TrimSuffix(tenancy.MetadataCIDRs[0], "/32"), strings.TrimSuffix(tenancy.MetadataCIDRs[2], "/32")
	require.Equal(t, "169.254.42.42", scaleway, "Scaleway's metadata address")
	remote := otherNode(clientNode)
	listeners := []string{"np-listen-" + clientNode, "np-listen-" + remote}
	for i, node := range []string{clientNode, remote} {
		listener := pod(listeners[i], node, "exec httpd -f -p 8080 -h /")
		listener.Spec.HostNetwork = true
		_, err := c.client.CoreV1().Pods("default").Create(ctx, listener, metav1.CreateOptions{})
		require.NoError(t, err)
		c.waitRunning(t, listener.Name)
	}
	// A listener in a platform namespace that has no ingress policy of its own, as vCluster Platform's has none:
	// kube-system here, on another node than the tenant's client. A pod of no tenant reaches it; a tenant's does not,
	// since its egress excludes the cluster's pod range (existing.podCIDRs), which kube-router's ipBlock would match.
	platformListener := pod("np-platform", remote, "exec httpd -f -p 8080 -h /")
	_, err := c.client.CoreV1().Pods(metav1.NamespaceSystem).Create(ctx, platformListener, metav1.CreateOptions{})
	require.NoError(t, err)
	platformPod := c.waitRunningIn(t, metav1.NamespaceSystem, platformListener.Name)
	t.Cleanup(func() {
		for _, name := range append(listeners, "np-outsider", "np-beside-web", "np-across-web") {
			_ = c.client.CoreV1().Pods("default").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
		}
		_ = c.client.CoreV1().Pods(metav1.NamespaceSystem).Delete(context.Background(), platformListener.Name,
			metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
	})
	for _, addr := range []string{gke, nodeLocalAddress} {
		c.inNode(t, clientNode, "ip", "addr", "replace", addr+"/32", "dev", "lo")
	}
	c.inNode(t, remote, "ip", "addr", "replace", scaleway+"/32", "dev", "lo")
	remoteNode, err := c.client.CoreV1().Nodes().Get(ctx, remote, metav1.GetOptions{})
	require.NoError(t, err)
	c.inNode(t, clientNode, "ip", "route", "replace", scaleway+"/32", "via", nodeAddress(remoteNode))

	webAddr := net.JoinHostPort(web.Status.PodIP, "8080")
	vclusterAPI, err := c.client.CoreV1().Services(naming.Namespace(legal)).Get(ctx, legal, metav1.GetOptions{})
	require.NoError(t, err)
	apiAddr := net.JoinHostPort(vclusterAPI.Spec.ClusterIP, "443")
	// The Service legal-ai made in its vCluster for its web Deployment (checkWorkloadsThroughVCluster), as vCluster
	// copied it to the host.
	ownService, err := c.client.CoreV1().Services(naming.Namespace(legal)).Get(ctx, syncedName("web", "default", legal), metav1.GetOptions{})
	require.NoError(t, err, "legal-ai's web Service on the host")
	serviceAddr := net.JoinHostPort(ownService.Spec.ClusterIP, "80")
	platformAddr := net.JoinHostPort(platformPod.Status.PodIP, "8080")
	for _, tc := range []struct {
		what    string
		from    *corev1.Pod
		to      string
		reached bool
	}{
		{"a pod of the same tenant reaches its neighbour", own, webAddr, true},
		{"another tenant's pod is refused", other, webAddr, false},
		{"a pod of no tenant on the same node is refused", running["np-beside-web"], webAddr, false},
		{"a pod of no tenant on another node is refused", running["np-across-web"], webAddr, false},
		{"a pod of the same tenant reaches its vCluster's API", own, apiAddr, true},
		{"a pod of the same tenant reaches its Service", own, serviceAddr, true},
		{"another tenant's pod is refused at this tenant's Service", other, serviceAddr, false},
		{"a pod of no tenant reaches a platform namespace's pod (the control)", outsider, platformAddr, true},
		{"a tenant's pod is refused at a platform namespace's pod", own, platformAddr, false},
		{"another tenant's pod is refused at a platform namespace's pod", other, platformAddr, false},
		{"another tenant's pod is refused at this tenant's vCluster API", other, apiAddr, false},
		{"a pod of no tenant reaches GKE's metadata address on its node (the control)", outsider, net.JoinHostPort(gke, "8080"), true},
		{"a tenant's pod is refused at GKE's metadata address on its node", own, net.JoinHostPort(gke, "8080"), false},
		{"a pod of no tenant reaches Scaleway's metadata address across the bridge (the control)", outsider, net.JoinHostPort(scaleway, "8080"), true},
		{"a tenant's pod is refused at Scaleway's metadata address across the bridge", own, net.JoinHostPort(scaleway, "8080"), false},
		{"a tenant's pod reaches the node's other link-local address", own, net.JoinHostPort(nodeLocalAddress, "8080"), true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			// The enforcer applies a pod's rules a moment after the pod has an address: the verdict settles. A refusal
			// is the enforcer's reject, never a packet lost on its way.
			var out string
			err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
				var dialErr error
				out, dialErr = c.execIn(tc.from.Namespace, tc.from.Name, "/bin/podcheck", "dial", tc.to)
				if tc.reached {
					return dialErr == nil, nil
				}
				return dialErr != nil && strings.Contains(out, refused), nil
			})
			assert.NoError(t, err, "%s/%s dialling %s, reached=%v wanted: %s", tc.from.Namespace, tc.from.Name, tc.to, tc.reached, out)
		})
	}

	t.Run("the machine reaches a tenant's pods on the vCluster API's port only", func(t *testing.T) {
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
			conn, err := net.DialTimeout("tcp", webAddr, 3*time.Second)
			if err == nil {
				conn.Close()
			}
			return err != nil && strings.Contains(err.Error(), refused), nil
		})
		assert.NoError(t, err, "the machine dialled %s, the web port of a tenant's pod", webAddr)
	})
}

// runThroughVCluster creates a pod in the default namespace of the tenant's vCluster and returns the host's copy
// once it runs.
func (c *cluster) runThroughVCluster(t *testing.T, ctx context.Context, tenant string, cfg *rest.Config, name, command string) *corev1.Pod {
	t.Helper()
	return c.runSpecThroughVCluster(t, ctx, tenant, cfg, name, tenantPod(command))
}

// runSpecThroughVCluster is runThroughVCluster of a pod spec.
func (c *cluster) runSpecThroughVCluster(t *testing.T, ctx context.Context, tenant string, cfg *rest.Config, name string, spec corev1.PodSpec) *corev1.Pod {
	t.Helper()
	vc := c.createThroughVCluster(t, ctx, tenant, cfg, name, spec)
	var host *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		host, err = c.client.CoreV1().Pods(naming.Namespace(tenant)).Get(ctx, syncedName(name, "default", tenant), metav1.GetOptions{})
		return err == nil && host.Status.Phase == corev1.PodRunning && host.Status.PodIP != "", nil
	})
	require.NoError(t, err, "%s of %s never ran on the host: %s", name, tenant, describePods(ctx, vc, "default"))
	return host
}

// createThroughVCluster creates a pod in the default namespace of the tenant's vCluster, and returns the vCluster's
// client.
func (c *cluster) createThroughVCluster(t *testing.T, ctx context.Context, tenant string, cfg *rest.Config, name string, spec corev1.PodSpec) kubernetes.Interface {
	t.Helper()
	vc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	// The service account appears in a new vCluster's default namespace a moment after it starts.
	var last error
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = vc.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec},
			metav1.CreateOptions{})
		return last == nil || apierrors.IsAlreadyExists(last), nil
	})
	require.NoError(t, err, "creating %s through %s's vCluster: %v", name, tenant, last)
	return vc
}

// syncedName is the host name vCluster gives an object of a virtual namespace (loft-sh/vcluster v0.36.1
// pkg/util/translate/single_namespace.go, for names short enough to need no hash).
func syncedName(name, virtualNS, tenant string) string {
	return name + "-x-" + virtualNS + "-x-" + tenant
}

// execIn runs a command in the main container of a pod of any namespace, as the cluster's admin.
func (c *cluster) execIn(namespace, pod string, command ...string) (string, error) {
	req := c.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: "main", Command: command, Stdout: true, Stderr: true,
	}, scheme.ParameterCodec)
	executor, err := remotecommand.NewSPDYExecutor(c.config, "POST", req.URL())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	return stdout.String() + stderr.String(), err
}

// otherNode is the first node of the test cluster that is not node.
func otherNode(node string) string {
	for i, pool := range pools {
		if name := fmt.Sprintf("%s-%d", pool, i); name != node {
			return name
		}
	}
	return ""
}

// nodeAddress is a node's internal address.
func nodeAddress(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// inNode runs a command in a node's network and mount namespaces, as scripts/local-nodes.sh in_node does.
func (c *cluster) inNode(t *testing.T, node string, command ...string) {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(c.dir, "run", node+".holder.pid"))
	require.NoError(t, err)
	out, err := exec.Command("nsenter", append([]string{"-t", strings.TrimSpace(string(pid)), "-n", "-m", "--"}, command...)...).CombinedOutput()
	require.NoError(t, err, "in %s: %v: %s", node, command, out)
}
