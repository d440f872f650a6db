package nodes

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
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
	"k8s.io/utils/ptr"
)

// gpuByName is a GPU a tenant of the local stack asks for by its class's extended-resource name
// (stacks/Pulumi.local.yaml, vcluster.gpuAccess both): the class, the pool whose nodes offer it and the device type
// the simulated plugin publishes there.
type gpuByName struct {
	tenant, class, pool, deviceType string
}

var gpusByName = []gpuByName{
	{"legal-ai", "gpu-whole", "a100-whole", "gpu"},
	{"research-ai", "gpu-slice", "a100-mig", "mig"},
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
		})
		t.Run(g.tenant+" asks for "+g.class, func(t *testing.T) {
			vc, err := kubernetes.NewForConfig(clients[g.tenant])
			require.NoError(t, err)
			name := tenancy.DefaultExtendedResourceName(g.class)
			hostNS := naming.Namespace(g.tenant)
			c.endDemoGPUJobs(t, ctx, hostNS, g.class)
			pod, container := nonRoot()
			one := corev1.ResourceList{corev1.ResourceName(name): resource.MustParse("1")}
			deployments := vc.AppsV1().Deployments("default")
			_, err = deployments.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "trainer"},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)),
					Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "trainer"}},
					Template: labelled("trainer", corev1.PodSpec{SecurityContext: pod, Containers: []corev1.Container{{
						Name: "main", Image: draplugin.ProbeImage, ImagePullPolicy: corev1.PullNever, SecurityContext: container,
						// The one line a tenant writes: a request defaults to its limit.
						Resources: corev1.ResourceRequirements{Limits: one},
					}}})}}, metav1.CreateOptions{})
			require.NoError(t, err, "creating the Deployment through %s's vCluster", g.tenant)

			var virtual corev1.Pod
			err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
				pods, err := vc.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=trainer"})
				if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
					return false, nil
				}
				virtual = pods.Items[0]
				return true, nil
			})
			require.NoError(t, err, "the Deployment's pod never ran in %s's vCluster: %s", g.tenant, describePods(ctx, vc, "default"))
			host, err := c.client.CoreV1().Pods(hostNS).Get(ctx, syncedName(virtual.Name, "default", g.tenant), metav1.GetOptions{})
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(host.Spec.NodeName, g.pool+"-"), "%s runs on %s, a node of pool %s", host.Name, host.Spec.NodeName, g.pool)
			// What the tenant wrote, and the namespace's default memory limit (LimitRange) beside it.
			assert.Equal(t, "1", ptr.To(host.Spec.Containers[0].Resources.Limits[corev1.ResourceName(name)]).String(),
				"the host pod asks for what the tenant wrote: %v", host.Spec.Containers[0].Resources.Limits)
			assert.Equal(t, "1", ptr.To(host.Spec.Containers[0].Resources.Requests[corev1.ResourceName(name)]).String(),
				"an extended resource's request follows its limit")
			assert.Empty(t, host.Spec.ResourceClaims, "the tenant wrote no claim")
			require.NotNil(t, host.Status.ExtendedResourceClaimStatus, "the scheduler made the pod's claim")
			assert.Equal(t, host.Status.ExtendedResourceClaimStatus, virtual.Status.ExtendedResourceClaimStatus,
				"the tenant sees the host's status of its pod")

			claimName := host.Status.ExtendedResourceClaimStatus.ResourceClaimName
			claim, err := c.client.ResourceV1().ResourceClaims(hostNS).Get(ctx, claimName, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, "true", claim.Annotations[tenancy.ExtendedResourceClaimAnnotation], "the scheduler's mark")
			require.NotNil(t, claim.Status.Allocation)
			require.Len(t, claim.Status.Allocation.Devices.Results, 1)
			result := claim.Status.Allocation.Devices.Results[0]
			assert.Equal(t, host.Spec.NodeName, result.Pool, "the device is from the pod's node")
			device := c.publishedDevice(t, ctx, host.Spec.NodeName, result)
			assert.Equal(t, g.deviceType, *device.Attributes["type"].StringValue, "a device of the class's type")

			log := c.logs(t, hostNS, host.Name, "main")
			assert.Equal(t, []string{"uuid: " + *device.Attributes["uuid"].StringValue}, linesWith(log, "uuid: "),
				"the container sees its own device and no other:\n%s", log)

			require.NoError(t, deployments.Delete(ctx, "trainer", metav1.DeleteOptions{}))
			err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				_, err := c.client.ResourceV1().ResourceClaims(hostNS).Get(ctx, claimName, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			assert.NoError(t, err, "the scheduler's claim %s outlived its pod: its device stays taken", claimName)
		})
	}
}

// endDemoGPUJobs deletes the GPU pods and claims of the class that `make demo` started in the tenant's namespace
// (localdemo: demo-<class>, and a second that waits), as a tenant ends its jobs: they hold the pool's whole GPU and the
// tenant's quota of the class, which counts claims and names together.
func (c *cluster) endDemoGPUJobs(t *testing.T, ctx context.Context, ns, class string) {
	t.Helper()
	prefix := "demo-" + class
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
