package localdemo

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDiffersTellsAPurgedClusterFromARestartedOne(t *testing.T) {
	recorded := clusterID{Server: "https://127.0.0.1:26443", CA: "ca-1", KubeSystemUID: "uid-1"}
	for _, c := range []struct {
		name string
		now  clusterID
		want []string
	}{
		{"restarted: same CA, same etcd", recorded, nil},
		{"purged: new CA and fresh etcd", clusterID{Server: recorded.Server, CA: "ca-2", KubeSystemUID: "uid-2"},
			[]string{"another certificate authority", "kube-system namespace uid-1 then, uid-2 now"}},
		{"etcd wiped, certificates kept", clusterID{Server: recorded.Server, CA: "ca-1", KubeSystemUID: "uid-2"},
			[]string{"kube-system namespace uid-1 then, uid-2 now"}},
		{"moved to another port", clusterID{Server: "https://127.0.0.1:36443", CA: "ca-1", KubeSystemUID: "uid-1"},
			[]string{"API server https://127.0.0.1:26443 then, https://127.0.0.1:36443 now"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			diff := recorded.differs(c.now)
			if c.want == nil {
				assert.Empty(t, diff)
			}
			for _, w := range c.want {
				assert.Contains(t, diff, w)
			}
		})
	}

	t.Run("a record from the state's kubeconfig output has no UID: server and CA decide", func(t *testing.T) {
		fromOutput := clusterID{Server: recorded.Server, CA: recorded.CA}
		assert.Empty(t, fromOutput.differs(recorded))
		assert.Equal(t, "another certificate authority", fromOutput.differs(clusterID{Server: recorded.Server, CA: "ca-2", KubeSystemUID: "uid-2"}))
	})
}

func kubeconfig(server, current string, ca []byte) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: local
  context:
    cluster: local
    user: admin
users:
- name: admin
  user: {}
current-context: %s
`, server, base64.StdEncoding.EncodeToString(ca), current)
}

func TestIdentifyReadsTheCurrentContextsServerAndCA(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
	sum := sha256.Sum256(ca)
	id, err := identify(kubeconfig("https://127.0.0.1:26443", "local", ca))
	require.NoError(t, err)
	assert.Equal(t, clusterID{Server: "https://127.0.0.1:26443", CA: hex.EncodeToString(sum[:])}, id)

	other, err := identify(kubeconfig("https://127.0.0.1:26443", "local", []byte("another CA")))
	require.NoError(t, err)
	assert.NotEmpty(t, id.differs(other), "a new CA is another cluster")

	_, err = identify(kubeconfig("https://127.0.0.1:26443", "elsewhere", ca))
	assert.ErrorContains(t, err, `no context "elsewhere"`)
}

func TestRecordRoundTrips(t *testing.T) {
	dir := t.TempDir()
	rec, err := readRecord(dir)
	require.NoError(t, err)
	assert.Nil(t, rec, "no record before the first up")

	id := clusterID{Server: "https://127.0.0.1:26443", CA: "ca", KubeSystemUID: "uid"}
	require.NoError(t, writeRecord(dir, id))
	rec, err = readRecord(dir)
	require.NoError(t, err)
	assert.Equal(t, &id, rec)

	require.NoError(t, removeRecord(dir))
	require.NoError(t, removeRecord(dir), "removing an absent record is no error")
	rec, err = readRecord(dir)
	require.NoError(t, err)
	assert.Nil(t, rec)
}
