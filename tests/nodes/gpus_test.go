package nodes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localdemo"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/draplugin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// gpuByName is a GPU a tenant of the local stack asks for by its class's extended-resource name
// (stacks/Pulumi.local.yaml, vcluster.gpuAccess both): the class, the pool whose nodes offer it and the device type
// the simulated plugin publishes there.
type gpuByName struct {
	tenant, class, pool, deviceType string
	quota                           int
}

var gpusByName = []gpuByName{
	{"legal-ai", "gpu-whole", "a100-whole", "gpu", 3},
	{"research-ai", "gpu-slice", "a100-mig", "mig", 2},
}

// checkGPUsByName: each tenant, with its own kubeconfig, creates a Deployment in its own vCluster whose container
// asks for one device of its class by the class's name, and nothing else: no claim, no toleration, no node selector.
// vCluster's open-source syncer copies the request to the host unchanged, the host scheduler gives the pod a device
// of the class on a node of the class's pool and makes its claim, the node's plugin prepares it, and the container
// sees that device and no other. Deleting the Deployment frees the device: the scheduler's claim goes with its pod.
func (c *cluster) checkGPUsByName(t *testing.T, ctx context.Context, clients map[string]*rest.Config) {
	for _, g := range gpusByName {
		t.Run(g.tenant+" reads the names it may ask for", func(t *testing.T) {
			vc, err := kubernetes.NewForConfig(clients[g.tenant])
			require.NoError(t, err)
			var offered *corev1.ConfigMap
			err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
				offered, err = vc.CoreV1().ConfigMaps(vcluster.OfferedNamespace).Get(ctx, vcluster.OfferedConfigMap, metav1.GetOptions{})
				return err == nil, nil
			})
			require.NoError(t, err, "ConfigMap %s/%s in %s's vCluster", vcluster.OfferedNamespace, vcluster.OfferedConfigMap, g.tenant)
			var keys []string
			for k := range offered.Data {
				keys = append(keys, k)
			}
			assert.ElementsMatch(t, []string{g.class, "usage"}, keys, "its own class only")
			assert.Contains(t, offered.Data[g.class], "name: "+tenancy.DefaultExtendedResourceName(g.class))
			assert.Contains(t, offered.Data[g.class], "NVIDIA A100-SXM4-40GB")
			assert.Contains(t, offered.Data[g.class], fmt.Sprintf("quota: %d", g.quota), "its quota of the class")
		})
		t.Run(g.tenant+" asks for "+g.class, func(t *testing.T) {
			vc, err := kubernetes.NewForConfig(clients[g.tenant])
			require.NoError(t, err)
			name := tenancy.DefaultExtendedResourceName(g.class)
			hostNS := naming.Namespace(g.tenant)
			c.endDemoGPUJobs(t, ctx, g.tenant, g.class, vc)
			startByName(t, ctx, vc, g.tenant, "trainer", name)
			require.NoError(t, waitVirtualRunning(ctx, vc, "trainer"), "the Deployment's pod never ran in %s's vCluster: %s",
				g.tenant, describePods(ctx, vc, "default"))
			virtual := virtualPod(t, ctx, vc, "trainer")
			host, device := c.hostDevice(t, ctx, g.tenant, virtual)
			assert.True(t, strings.HasPrefix(host.Spec.NodeName, g.pool+"-"), "%s runs on %s, a node of pool %s", host.Name, host.Spec.NodeName, g.pool)
			// What the tenant wrote, and the namespace's default memory limit (LimitRange) beside it.
			assert.Equal(t, "1", ptr.To(host.Spec.Containers[0].Resources.Limits[corev1.ResourceName(name)]).String(),
				"the host pod asks for what the tenant wrote: %v", host.Spec.Containers[0].Resources.Limits)
			assert.Equal(t, "1", ptr.To(host.Spec.Containers[0].Resources.Requests[corev1.ResourceName(name)]).String(),
				"an extended resource's request follows its limit")
			assert.Empty(t, host.Spec.ResourceClaims, "the tenant wrote no claim")
			assert.Equal(t, host.Status.ExtendedResourceClaimStatus, virtual.Status.ExtendedResourceClaimStatus,
				"the tenant sees the host's status of its pod")
			assert.Equal(t, g.deviceType, *device.Attributes["type"].StringValue, "a device of the class's type")
			log := c.logs(t, hostNS, host.Name, "main")
			assert.Equal(t, []string{"uuid: " + *device.Attributes["uuid"].StringValue}, linesWith(log, "uuid: "),
				"the container sees its own device and no other:\n%s", log)
			c.endByName(t, ctx, vc, g.tenant, "trainer", host)
		})
	}
}

// checkFreedDeviceGoesToAnotherTenant: research-ai moves to names only (gpuAccess extendedResources: its vCluster keeps
// the open-source syncer and loses every claim setting) and is granted gpu-whole beside legal-ai, one device at a
// time. The pool's one node has one such GPU. While legal-ai's Deployment holds it, research-ai's pod, within its
// quota, waits in the host scheduler for a device; once legal-ai deletes its Deployment, research-ai's pod gets that
// same device. The tenants' edit is the stack file's, applied as the demo applies it.
func (c *cluster) checkFreedDeviceGoesToAnotherTenant(t *testing.T, ctx context.Context, opts localdemo.Options, before map[string]*rest.Config) {
	const class, pool = "gpu-whole", "a100-whole"
	name := tenancy.DefaultExtendedResourceName(class)
	// The demo's own claims are not the scheduler's: a switch to names only is refused while they exist.
	for tenant, demoClass := range map[string]string{"research-ai": "gpu-slice", "legal-ai": class} {
		vc, err := kubernetes.NewForConfig(before[tenant])
		require.NoError(t, err)
		c.endDemoGPUJobs(t, ctx, tenant, demoClass, vc)
	}
	sc, err := platform.ReadStackFile(filepath.Join(c.root, "stacks", "Pulumi.local.yaml"))
	require.NoError(t, err)
	var edited []platform.TenantArgs
	require.NoError(t, json.Unmarshal([]byte(sc.Values[platform.ConfigNamespace+":tenants"]), &edited))
	for i := range edited {
		if edited[i].Name == "research-ai" {
			edited[i].GPUAccess = vcluster.ExtendedResources
			edited[i].Classes = append(edited[i].Classes, class)
			edited[i].GPUQuota[class] = 1
		}
	}
	opts.Tenants = edited
	var progress bytes.Buffer
	opts.Progress = &progress
	require.NoError(t, localdemo.Apply(ctx, opts), "the up that moves research-ai to names only:\n%s", lastLines(progress.String(), 60))
	configs, err := localdemo.TenantKubeconfigs(ctx, opts)
	require.NoError(t, err)
	clients := map[string]kubernetes.Interface{}
	for _, tenant := range []string{"legal-ai", "research-ai"} {
		cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(configs[tenant]))
		require.NoError(t, err, tenant)
		clients[tenant], err = kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
	}

	role, err := c.client.RbacV1().Roles(naming.Namespace("research-ai")).Get(ctx, "vc-research-ai", metav1.GetOptions{})
	require.NoError(t, err)
	for _, rule := range role.Rules {
		assert.NotContains(t, rule.Resources, "resourceclaims", "research-ai's syncer keeps no claim right: %v", rule)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		offered, err := clients["research-ai"].CoreV1().ConfigMaps(vcluster.OfferedNamespace).Get(ctx, vcluster.OfferedConfigMap, metav1.GetOptions{})
		return err == nil && strings.Contains(offered.Data[class], "quota: 1"), nil
	})
	require.NoError(t, err, "research-ai reads its new class and its quota of it inside its vCluster")

	startByName(t, ctx, clients["legal-ai"], "legal-ai", "holder", name)
	require.NoError(t, waitVirtualRunning(ctx, clients["legal-ai"], "holder"), "legal-ai's pod: %s",
		describePods(ctx, clients["legal-ai"], "default"))
	held := virtualPod(t, ctx, clients["legal-ai"], "holder")
	holderHost, device := c.hostDevice(t, ctx, "legal-ai", held)
	require.True(t, strings.HasPrefix(holderHost.Spec.NodeName, pool+"-"), holderHost.Spec.NodeName)

	startByName(t, ctx, clients["research-ai"], "research-ai", "waiter", name)
	var waiting *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := c.client.CoreV1().Pods(naming.Namespace("research-ai")).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for i, p := range pods.Items {
			if strings.HasPrefix(p.Name, "waiter-") && unschedulable(&p) {
				waiting = &pods.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(t, err, "research-ai's pod waits in the host scheduler while legal-ai holds the pool's GPU")
	assert.Nil(t, waiting.Status.ExtendedResourceClaimStatus, "no device for it yet")

	c.endByName(t, ctx, clients["legal-ai"], "legal-ai", "holder", holderHost)
	require.NoError(t, waitVirtualRunning(ctx, clients["research-ai"], "waiter"), "research-ai's pod once the GPU is free: %s",
		describePods(ctx, clients["research-ai"], "default"))
	got := virtualPod(t, ctx, clients["research-ai"], "waiter")
	gotHost, gotDevice := c.hostDevice(t, ctx, "research-ai", got)
	assert.Equal(t, holderHost.Spec.NodeName, gotHost.Spec.NodeName, "the freed GPU's node")
	assert.Equal(t, *device.Attributes["uuid"].StringValue, *gotDevice.Attributes["uuid"].StringValue, "the device legal-ai freed")
	log := c.logs(t, naming.Namespace("research-ai"), gotHost.Name, "main")
	assert.Equal(t, []string{"uuid: " + *device.Attributes["uuid"].StringValue}, linesWith(log, "uuid: "),
		"research-ai's container sees that device and no other:\n%s", log)
	c.endByName(t, ctx, clients["research-ai"], "research-ai", "waiter", gotHost)
}

// startByName creates, through the tenant's vCluster, a Deployment of one pod whose container asks for one device by
// the extended-resource name and for nothing else: no claim, no toleration, no node selector.
func startByName(t *testing.T, ctx context.Context, vc kubernetes.Interface, tenant, deployment, name string) {
	t.Helper()
	pod, container := nonRoot()
	one := corev1.ResourceList{corev1.ResourceName(name): resource.MustParse("1")}
	_, err := vc.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: deployment},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": deployment}},
			Template: labelled(deployment, corev1.PodSpec{SecurityContext: pod, Containers: []corev1.Container{{
				Name: "main", Image: draplugin.ProbeImage, ImagePullPolicy: corev1.PullNever, SecurityContext: container,
				// The one line a tenant writes: a request defaults to its limit.
				Resources: corev1.ResourceRequirements{Limits: one},
			}}})}}, metav1.CreateOptions{})
	require.NoError(t, err, "creating Deployment %s through %s's vCluster", deployment, tenant)
}

// waitVirtualRunning waits for the one pod of a Deployment in the vCluster's default namespace to run.
func waitVirtualRunning(ctx context.Context, vc kubernetes.Interface, deployment string) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := vc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + deployment})
		return err == nil && len(pods.Items) == 1 && pods.Items[0].Status.Phase == corev1.PodRunning, nil
	})
}

// virtualPod is the one pod of a Deployment in the vCluster's default namespace.
func virtualPod(t *testing.T, ctx context.Context, vc kubernetes.Interface, deployment string) corev1.Pod {
	t.Helper()
	pods, err := vc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=" + deployment})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	return pods.Items[0]
}

// hostDevice is the host pod of a tenant's virtual pod that asked by name, and the device the scheduler's claim for
// it holds, as the node's plugin published it; the claim carries the scheduler's mark and a device of the pod's node.
func (c *cluster) hostDevice(t *testing.T, ctx context.Context, tenant string, virtual corev1.Pod) (*corev1.Pod, resourcev1.Device) {
	t.Helper()
	hostNS := naming.Namespace(tenant)
	host, err := c.client.CoreV1().Pods(hostNS).Get(ctx, syncedName(virtual.Name, "default", tenant), metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, host.Status.ExtendedResourceClaimStatus, "the scheduler made the pod's claim")
	claim, err := c.client.ResourceV1().ResourceClaims(hostNS).Get(ctx, host.Status.ExtendedResourceClaimStatus.ResourceClaimName, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "true", claim.Annotations[tenancy.ExtendedResourceClaimAnnotation], "the scheduler's mark")
	require.NotNil(t, claim.Status.Allocation)
	require.Len(t, claim.Status.Allocation.Devices.Results, 1)
	result := claim.Status.Allocation.Devices.Results[0]
	assert.Equal(t, host.Spec.NodeName, result.Pool, "the device is from the pod's node")
	return host, c.publishedDevice(t, ctx, host.Spec.NodeName, result)
}

// endByName deletes the tenant's Deployment through its vCluster and waits until the scheduler's claim of its host
// pod is gone: the device is free again.
func (c *cluster) endByName(t *testing.T, ctx context.Context, vc kubernetes.Interface, tenant, deployment string, host *corev1.Pod) {
	t.Helper()
	require.NoError(t, vc.AppsV1().Deployments("default").Delete(ctx, deployment, metav1.DeleteOptions{}))
	claimName := host.Status.ExtendedResourceClaimStatus.ResourceClaimName
	err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := c.client.ResourceV1().ResourceClaims(naming.Namespace(tenant)).Get(ctx, claimName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	assert.NoError(t, err, "the scheduler's claim %s outlived its pod: its device stays taken", claimName)
}

// unschedulable says the scheduler tried the pod and found no place for it yet.
func unschedulable(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

// endDemoGPUJobs ends the GPU jobs of the class that `make demo` started for the tenant, as the tenant ends its jobs:
// the Deployment it created in its vCluster (localdemo: demo-<class>, when it asks by name), then the pods and claims
// written on the host (demo-<class>, and the ones that wait). They hold the pool's whole GPU and the tenant's quota of
// the class, which counts claims and names together.
func (c *cluster) endDemoGPUJobs(t *testing.T, ctx context.Context, tenant, class string, vc kubernetes.Interface) {
	t.Helper()
	ns, prefix := naming.Namespace(tenant), "demo-"+class
	err := vc.AppsV1().Deployments("default").Delete(ctx, prefix, metav1.DeleteOptions{})
	if !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	pods, err := c.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) {
			require.NoError(t, c.client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}))
		}
	}
	claims, err := c.client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, claim := range claims.Items {
		if !strings.HasPrefix(claim.Name, prefix) {
			continue
		}
		require.NoError(t, c.client.ResourceV1().ResourceClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}))
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		require.NoError(t, err, "the demo's claim %s/%s is released once its pod is gone", ns, claim.Name)
	}
}

// publishedDevice is an allocated device as its node's plugin published it.
func (c *cluster) publishedDevice(t *testing.T, ctx context.Context, node string, result resourcev1.DeviceRequestAllocationResult) resourcev1.Device {
	t.Helper()
	slices, err := c.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	require.NoError(t, err)
	for _, s := range slices.Items {
		for _, d := range s.Spec.Devices {
			if s.Spec.Driver == result.Driver && s.Spec.Pool.Name == result.Pool && d.Name == result.Device {
				return d
			}
		}
	}
	require.Failf(t, "device not published", "%s/%s/%s is in no ResourceSlice of %s", result.Driver, result.Pool, result.Device, node)
	return resourcev1.Device{}
}

// linesWith are the lines of s that start with prefix.
func linesWith(s, prefix string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}
