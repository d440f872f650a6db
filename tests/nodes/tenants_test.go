package nodes

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment"
	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localdemo"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// tenants are the local stack's (stacks/Pulumi.local.yaml), with the Pod Security level each one's namespace enforces.
var tenants = map[string]string{"legal-ai": "restricted", "research-ai": "baseline"}

// nonRoot is a restricted pod's security contexts (probe's), as the user the busybox image runs as.
func nonRoot() (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	pod := probe.RestrictedPod()
	pod.RunAsUser = ptr.To(int64(65532))
	return pod, probe.RestrictedContainer()
}

// checkStorage: a claim of no class gets the default class, whose provisioner makes the volume on the node its pod
// runs on, writable by a pod that is not root; deleting the claim deletes the volume and its directory.
func (c *cluster) checkStorage(t *testing.T) {
	ctx := context.Background()
	claims := c.client.CoreV1().PersistentVolumeClaims("default")
	_, err := claims.Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	p := pod("writer", "system-0", "echo written-by-$(id -u) > /data/file && cat /data/file && exec sleep 3600")
	p.Spec.SecurityContext, p.Spec.Containers[0].SecurityContext = nonRoot()
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	_, err = c.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
	require.NoError(t, err)
	c.waitRunning(t, "writer")
	assert.Equal(t, "written-by-65532\n", c.logs(t, "default", "writer", "main"))

	claim, err := claims.Get(ctx, "data", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "local-path", ptr.Deref(claim.Spec.StorageClassName, ""), "the default class")
	pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, pv.Spec.HostPath, "a directory of the node")
	dir := pv.Spec.HostPath.Path
	assert.True(t, strings.HasPrefix(dir, filepath.Join(c.dir, "volumes")+"/"), "the volume lives in the cluster's directory: %s", dir)
	written, err := os.ReadFile(filepath.Join(dir, "file"))
	require.NoError(t, err)
	assert.Equal(t, "written-by-65532\n", string(written))

	require.NoError(t, c.client.CoreV1().Pods("default").Delete(ctx, "writer", metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}))
	require.NoError(t, claims.Delete(ctx, "data", metav1.DeleteOptions{}))
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := os.Stat(dir)
		_, getErr := c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return os.IsNotExist(err) && apierrors.IsNotFound(getErr), nil
	})
	assert.NoError(t, err, "the volume and its directory %s outlive their claim", dir)
}

// checkTenants applies the local stack on the real nodes, as `make demo` does with GT_NODES, and checks that each
// tenant's vCluster runs under its namespace's guards, that each tenant reaches its own vCluster's API with the
// kubeconfig the platform exports and is refused by the other's, and that what a tenant applies through its vCluster runs.
func (c *cluster) checkTenants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	// The local stack's passphrase, as `make demo` is run with (docs/contributing.md, "Set-up commands").
	t.Setenv("PULUMI_CONFIG_PASSPHRASE", environment.LocalPassphrase)
	var progress, out bytes.Buffer
	opts := localdemo.Options{RepoRoot: c.root, ClusterDir: c.dir, StateDir: filepath.Join(c.dir, "state"),
		WorkDir: filepath.Join(c.dir, "engine"), Progress: &progress, Out: &out, Nodes: true}
	t.Cleanup(func() {
		if err := localdemo.Down(context.Background(), opts); err != nil {
			t.Errorf("demo down: %v\n%s", err, progress.String())
		}
	})
	require.NoError(t, localdemo.Up(ctx, opts), "demo up:\n%s\n%s", out.String(), lastLines(progress.String(), 60))

	for tenant, level := range tenants {
		ns := naming.Namespace(tenant)
		cp, err := c.client.CoreV1().Pods(ns).Get(ctx, tenant+"-0", metav1.GetOptions{})
		require.NoError(t, err)
		assert.True(t, podReady(cp), "%s's vCluster control plane is Ready: %+v", tenant, cp.Status)
		assert.Equal(t, "system-0", cp.Spec.NodeName, "the control plane runs on the node without GPUs")
		nsObj, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, level, nsObj.Labels["pod-security.kubernetes.io/enforce"], "the guard it runs under")
		t.Logf("%s's vCluster: created to Ready %s, peak memory %s", tenant, readyAfter(cp), peakMemory(cp))
		assert.Equal(t, "localhost/gpu-tenancy/vcluster-oss:0.36.1@"+lockDigest(t, c.root, "localhost/gpu-tenancy/vcluster-oss:0.36.1"),
			imageOf(cp, "syncer"), "the open-source syncer built here, by digest")
	}

	configs, err := localdemo.TenantKubeconfigs(ctx, opts)
	require.NoError(t, err)
	clients := map[string]*rest.Config{}
	for tenant := range tenants {
		require.NotEmpty(t, configs[tenant], "the stack exports %s's kubeconfig", tenant)
		cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(configs[tenant]))
		require.NoError(t, err)
		svc, err := c.client.CoreV1().Services(naming.Namespace(tenant)).Get(ctx, tenant, metav1.GetOptions{})
		require.NoError(t, err)
		u, err := url.Parse(cfg.Host)
		require.NoError(t, err)
		assert.Equal(t, svc.Spec.ClusterIP, u.Hostname(), "%s's kubeconfig names its vCluster Service, set by no one", tenant)
		clients[tenant] = cfg
	}
	for tenant, cfg := range clients {
		vc, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		_, err = vc.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		assert.NoError(t, err, "%s reaches its own vCluster with its own credentials (the certificate verified)", tenant)
		for other, otherCfg := range clients {
			if other == tenant {
				continue
			}
			stolen := rest.CopyConfig(cfg)
			stolen.CertData, stolen.KeyData = otherCfg.CertData, otherCfg.KeyData
			foreign, err := kubernetes.NewForConfig(stolen)
			require.NoError(t, err)
			_, err = foreign.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
			assert.True(t, apierrors.IsUnauthorized(err), "%s's credentials at %s's vCluster: %v", other, tenant, err)
		}
	}
	c.checkPodThroughVCluster(t, ctx, "legal-ai", clients["legal-ai"])
	c.checkWorkloadsThroughVCluster(t, ctx, "legal-ai", clients["legal-ai"])
	t.Run("each tenant gets a device of its class by asking for the class's name", func(t *testing.T) {
		c.checkGPUsByName(t, ctx, clients)
	})
	t.Run("NetworkPolicies hold for packets", func(t *testing.T) { c.checkNetworkPolicy(t, ctx, clients) })
	t.Run("an image one tenant pulled with its credentials does not start for another tenant", func(t *testing.T) {
		c.checkPrivateImage(t, ctx, clients)
	})
	t.Run("what reaches past the entitlement, sent through a vCluster by its admin, is refused on the host", func(t *testing.T) {
		c.checkHostileThroughVCluster(t, ctx, "legal-ai", clients["legal-ai"])
	})
	t.Run("what vCluster copies besides pods and Services, sent by its admin, is refused where it reaches past the entitlement", func(t *testing.T) {
		c.checkCopiesThroughVCluster(t, ctx, "legal-ai", clients["legal-ai"])
	})
	// Last: it restarts research-ai's vCluster on other settings.
	t.Run("a tenant without a licence gets the device another tenant freed", func(t *testing.T) {
		c.checkFreedDeviceGoesToAnotherTenant(t, ctx, opts, clients)
	})
}

// checkPodThroughVCluster creates a pod in the tenant's vCluster and waits until it runs there, placed by the host's
// scheduler on a real node: vCluster's syncer wrote the host pod, and the host's guards admitted it.
func (c *cluster) checkPodThroughVCluster(t *testing.T, ctx context.Context, tenant string, cfg *rest.Config) {
	vc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	c.runThroughVCluster(t, ctx, tenant, cfg, "hello", "echo hello from $(hostname) && exec sleep 3600")
	var got *corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err = vc.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.PodRunning, nil
	})
	require.NoError(t, err, "the pod created through %s's vCluster never ran: %+v", tenant, got)
	host, err := c.client.CoreV1().Pods(naming.Namespace(tenant)).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var synced []string
	for _, h := range host.Items {
		if h.Name == syncedName("hello", "default", tenant) {
			synced = append(synced, h.Name+" on "+h.Spec.NodeName+" "+string(h.Status.Phase))
		}
	}
	assert.Len(t, synced, 1, "the host runs the tenant's pod in the tenant's namespace: %v", synced)
	events, err := c.client.CoreV1().Events(naming.Namespace(tenant)).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
	require.NoError(t, err)
	for _, e := range events.Items {
		assert.Contains(t, e.Message, "error looking up service account", "a refused create on the host: %s", e.Message)
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyAfter is the time from the pod's creation to its Ready condition.
func readyAfter(p *corev1.Pod) time.Duration {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.LastTransitionTime.Sub(p.CreationTimestamp.Time)
		}
	}
	return 0
}

// peakMemory is the most memory the pod's containers used together, as its cgroup (v1, under its node's cgroup root)
// recorded it.
func peakMemory(p *corev1.Pod) string {
	files, _ := filepath.Glob("/sys/fs/cgroup/memory/*/kubepods*/*/pod" + string(p.UID) + "/memory.max_usage_in_bytes")
	if len(files) == 0 {
		files, _ = filepath.Glob("/sys/fs/cgroup/memory/*/kubepods*/pod" + string(p.UID) + "/memory.max_usage_in_bytes")
	}
	if len(files) != 1 {
		return "unknown"
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		return "unknown"
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

func imageOf(p *corev1.Pod, container string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// lockDigest is the digest images.lock records for ref.
func lockDigest(t *testing.T, root, ref string) string {
	t.Helper()
	for _, line := range lockLines(t, root) {
		if f := strings.Fields(line); f[0] == ref {
			return f[1]
		}
	}
	t.Fatalf("%s is not in images.lock", ref)
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
