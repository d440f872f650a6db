package localdemo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterID tells one local control plane from another. A purge gives a new certificate authority (the state's
// provider then fails with "x509: certificate signed by unknown authority") and a fresh etcd, whose kube-system
// namespace has a new UID; a restart, after a crash or `local-cluster.sh down`, keeps all three.
type clusterID struct {
	Server string `json:"server"`
	// CA is the SHA-256 of the CA certificate the kubeconfig trusts.
	CA string `json:"caSHA256"`
	// KubeSystemUID is unknown ("") in a record read from the state's kubeconfig output.
	KubeSystemUID string `json:"kubeSystemUID,omitempty"`
}

// differs says how the cluster the state was built against (r) and the current one (now) differ, or "" when they
// are one cluster.
func (r clusterID) differs(now clusterID) string {
	var diffs []string
	if r.Server != now.Server {
		diffs = append(diffs, fmt.Sprintf("API server %s then, %s now", r.Server, now.Server))
	}
	if r.CA != now.CA {
		diffs = append(diffs, "another certificate authority")
	}
	if r.KubeSystemUID != "" && now.KubeSystemUID != "" && r.KubeSystemUID != now.KubeSystemUID {
		diffs = append(diffs, fmt.Sprintf("kube-system namespace %s then, %s now", r.KubeSystemUID, now.KubeSystemUID))
	}
	return strings.Join(diffs, "; ")
}

// identify reads the server and CA of a kubeconfig's current context.
func identify(kubeconfig []byte) (clusterID, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return clusterID{}, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	kctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return clusterID{}, fmt.Errorf("the kubeconfig has no context %q", cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return clusterID{}, fmt.Errorf("the kubeconfig has no cluster %q", kctx.Cluster)
	}
	sum := sha256.Sum256(cluster.CertificateAuthorityData)
	return clusterID{Server: cluster.Server, CA: hex.EncodeToString(sum[:])}, nil
}

// connect reaches the control plane of the kubeconfig file and identifies it. The error says why it cannot: no
// kubeconfig (never started, or purged), or an API server that does not answer.
func connect(ctx context.Context, kubeconfigPath string) (kubernetes.Interface, clusterID, error) {
	raw, err := os.ReadFile(kubeconfigPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, clusterID{}, fmt.Errorf("there is no kubeconfig at %s (never started, or purged)", kubeconfigPath)
	}
	if err != nil {
		return nil, clusterID{}, err
	}
	id, err := identify(raw)
	if err != nil {
		return nil, clusterID{}, fmt.Errorf("%s: %w", kubeconfigPath, err)
	}
	rest, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		return nil, clusterID{}, fmt.Errorf("%s: %w", kubeconfigPath, err)
	}
	cs, err := kubernetes.NewForConfig(rest)
	if err != nil {
		return nil, clusterID{}, err
	}
	// A stopped API server refuses at once; a hung one must not stall the demo.
	probeCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	ns, err := cs.CoreV1().Namespaces().Get(probeCtx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return nil, clusterID{}, fmt.Errorf("the API server at %s does not answer: %w", id.Server, err)
	}
	id.KubeSystemUID = string(ns.UID)
	return cs, id, nil
}

// recordFile, in the local stack's work directory, names the cluster the state was built against. It is written
// before every up, since from then on the state may hold that cluster's objects, and goes with the state.
const recordFile = "cluster.json"

func readRecord(workDir string) (*clusterID, error) {
	raw, err := os.ReadFile(filepath.Join(workDir, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var id clusterID
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, fmt.Errorf("%s: %w (delete it: the demo falls back to the state's kubeconfig output)",
			filepath.Join(workDir, recordFile), err)
	}
	return &id, nil
}

func writeRecord(workDir string, id clusterID) error {
	raw, err := json.Marshal(id)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(workDir, recordFile), append(raw, '\n'), 0o600)
}

func removeRecord(workDir string) error {
	if err := os.Remove(filepath.Join(workDir, recordFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
