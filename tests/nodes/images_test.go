package nodes

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/syncbuf"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// privateRegistry is where the test serves a private registry: the host's end of the nodes' bridge (scripts/local-nodes.sh,
// its default GT_NODE_NET) on the port that the nodes' containerd dials over plain HTTP (GT_NODE_REGISTRY_PORT).
const (
	privateRegistryPort = "5000"
	privateRegistry     = "10.243.0.1:" + privateRegistryPort
)

// checkPrivateImage shows what the kubelet does with an image one tenant pulled with its own credentials: on the node
// that holds it, another tenant's pod may neither pull it without credentials nor start the cached copy, under either
// pull policy that would use a cached copy (KubeletEnsureSecretPulledImages, beta and on by default since 1.35:
// k8s.io/kubernetes v1.36.3 pkg/kubelet/images/image_manager.go, pullmanager/image_pull_manager.go). Each tenant
// writes its pods through its own vCluster, as it would.
func (c *cluster) checkPrivateImage(t *testing.T, ctx context.Context, clients map[string]*rest.Config) {
	owner, other := "legal-ai", "research-ai"
	password := make([]byte, 16)
	_, err := rand.Read(password)
	require.NoError(t, err)
	image := c.servePrivateImage(t, owner, hex.EncodeToString(password))

	ownerVC, err := kubernetes.NewForConfig(clients[owner])
	require.NoError(t, err)
	auth := map[string]any{"auths": map[string]any{privateRegistry: map[string]string{
		"auth": base64.StdEncoding.EncodeToString([]byte(owner + ":" + hex.EncodeToString(password)))}}}
	raw, err := json.Marshal(auth)
	require.NoError(t, err)
	_, err = ownerVC.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "private-registry"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: raw}}, metav1.CreateOptions{})
	require.NoError(t, err)
	spec := tenantPod("exec sleep 3600")
	spec.Containers[0].Image = image
	spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "private-registry"}}
	pulled := c.runSpecThroughVCluster(t, ctx, owner, clients[owner], "private-image", spec)
	node := pulled.Spec.NodeName
	t.Logf("%s's pod pulled %s with its pull secret and runs on %s", owner, image, node)

	for _, tc := range []struct {
		name   string
		policy corev1.PullPolicy
		reason string
	}{
		// The kubelet pulls again, with the pod's credentials (none), and the registry refuses.
		{"cached-if-not-present", corev1.PullIfNotPresent, "ErrImagePull|ImagePullBackOff"},
		// The kubelet answers as if the image were not there at all (image_manager.go
		// imageNotPresentOnNeverPolicyError: it does not reveal that another pod's image is).
		{"cached-never", corev1.PullNever, "ErrImageNeverPull"},
	} {
		t.Run("another tenant's pod on the same node, "+string(tc.policy), func(t *testing.T) {
			spec := tenantPod("exec sleep 3600")
			spec.Containers[0].Image = image
			spec.Containers[0].ImagePullPolicy = tc.policy
			spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
			vc := c.createThroughVCluster(t, ctx, other, clients[other], tc.name, spec)
			// It never runs, and holds a slot of the tenant's pod quota until deleted.
			t.Cleanup(func() {
				_ = vc.CoreV1().Pods("default").Delete(context.Background(), tc.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
			})
			var host *corev1.Pod
			err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
				var err error
				host, err = c.client.CoreV1().Pods(naming.Namespace(other)).Get(ctx, syncedName(tc.name, "default", other), metav1.GetOptions{})
				if err != nil || len(host.Status.ContainerStatuses) == 0 {
					return false, nil
				}
				w := host.Status.ContainerStatuses[0].State.Waiting
				return w != nil && strings.Contains("|"+tc.reason+"|", "|"+w.Reason+"|"), nil
			})
			require.NoError(t, err, "%s's pod of %s's image, %s: %s", other, owner, tc.policy, describePods(ctx, vc, "default"))
			assert.Equal(t, node, host.Spec.NodeName, "on the node that holds the image")
			status := host.Status.ContainerStatuses[0]
			assert.Nil(t, status.State.Running, "it never starts")
			assert.Zero(t, status.RestartCount)
			t.Logf("%s: %s: %s", tc.policy, status.State.Waiting.Reason, status.State.Waiting.Message)
		})
	}
}

// servePrivateImage starts a registry on the nodes' network that lets only user in, holding a copy of the busybox
// image the nodes hold already under a name and digest of its own, and returns the copy's reference.
func (c *cluster) servePrivateImage(t *testing.T, user, password string) string {
	t.Helper()
	passwordFile := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(passwordFile, []byte(password), 0o600))
	cmd := exec.Command(filepath.Join(c.root, ".tools", "nodeimages", "registry"), "-listen", privateRegistry, "-user", user,
		"-password-file", passwordFile, "private/busybox:1="+filepath.Join(c.dir, "images", "busybox.tar"))
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(out)
	var image string
	for lines.Scan() {
		if lines.Text() == "serving" {
			require.NotEmpty(t, image)
			// The rest of its output is not read: it writes none.
			return image
		}
		image, _, _ = strings.Cut(lines.Text(), " ")
	}
	t.Fatalf("the registry stopped before serving: %s", stderr.String())
	return ""
}
