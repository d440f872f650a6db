// Package e2e runs the local stack for real: the pulumi CLI and kubernetes provider built by `make tools`, the
// platform program as an inline program, and a local control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) of its own, on ports apart from the demo's, with simulated GPU nodes.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	"k8s.io/client-go/kubernetes"
)

var (
	repoRoot   string
	clusterDir string
	kubeconfig string
	client     kubernetes.Interface
)

// Ports apart from the demo's cluster (scripts/local-cluster.sh defaults), so both can run at once, and below the
// kernel's ephemeral range, which the script refuses; each shard adds its index to every port.
var clusterPorts = []struct {
	env  string
	port int
}{{"GT_ETCD_PORT", 31790}, {"GT_ETCD_PEER_PORT", 31800}, {"GT_APISERVER_PORT", 31443}, {"GT_KCM_PORT", 30257},
	{"GT_SCHEDULER_PORT", 30259}}

// clusterEnv is the control plane's environment: its ports, the shard's own; sharded says the run is one shard.
var (
	clusterEnv []string
	sharded    bool
)

func TestMain(m *testing.M) {
	flag.Parse()
	if spec := os.Getenv(engineChildEnv); spec != "" {
		os.Exit(runEngineChild(spec))
	}
	sharded = os.Getenv(shardEnv) != ""
	shard, err := selectShard(os.Getenv(shardEnv), ".")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, p := range clusterPorts {
		clusterEnv = append(clusterEnv, fmt.Sprintf("%s=%d", p.env, p.port+shard))
	}
	// A Service range made small on purpose, which the suite's few tenants fit and a stack of larger quotas does
	// not (TestServiceQuotasBeyondTheRangeAreRefusedBeforeAnythingIsCreated).
	clusterEnv = append(clusterEnv, "GT_SERVICE_CIDR="+e2eServiceCIDR)
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testing.Short() {
		fmt.Println("e2e: skipped with -short")
		return 0
	}
	var err error
	repoRoot, err = filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if tool := localcluster.MissingTool(repoRoot); tool != "" {
		fmt.Fprintf(os.Stderr, "e2e: %s is not built: run `make tools` (make test does)\n", tool)
		return 1
	}
	clusterDir, err = os.MkdirTemp("", "gpu-tenancy-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(clusterDir)
	if err := localCluster("up"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = localCluster("down")
		return 1
	}
	defer func() {
		if err := localCluster("down"); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	kubeconfig = filepath.Join(clusterDir, "kubeconfig")
	if client, err = probe.Connect(kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func localCluster(verb string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Ports set in the environment win over these defaults, so two suites can run side by side; a shard's own ports
	// win over the environment's, or two shards would share one (os/exec keeps the last of a duplicated key).
	env := append(slices.Clone(clusterEnv), os.Environ()...)
	if sharded {
		env = append(os.Environ(), clusterEnv...)
	}
	return localcluster.Run(ctx, repoRoot, clusterDir, verb, env, os.Stdout)
}
