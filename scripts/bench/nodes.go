package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/localstack/localcluster"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/draplugin"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/probe"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nodesEnv gives the benchmark's real nodes a bridge and networks of their own, apart from tests/nodes' defaults.
var nodesEnv = []string{"GT_NODE_BRIDGE=gtbench0", "GT_NODE_NET=10.247.0", "GT_POD_NET=10.248"}

// benchNodes starts a control plane of its own with two real nodes (a system node and a whole-A100 node with its DRA
// plugin): the nodes' start, from nothing to Ready with the GPU node's devices published, and the memory of every
// process they run; then a GPU pod from create to Running (scheduled, its claim allocated and prepared, its container started).
func benchNodes(ctx context.Context, root string) ([]row, error) {
	dir, err := os.MkdirTemp("", "gpu-tenancy-bench-nodes-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cl := &benchCluster{root: root, dir: filepath.Join(dir, "cluster"),
		env: append(append(os.Environ(), clusterEnv...), nodesEnv...)}
	defer cl.purge()
	// A control plane decides at its start whether nodes join it (the API server listens on their bridge): the nodes'
	// start is an up with them less an up without.
	start := time.Now()
	if err := localcluster.Run(ctx, root, cl.dir, "up", cl.env, os.Stderr); err != nil {
		return nil, err
	}
	alone := time.Since(start)
	if err := localcluster.Run(ctx, root, cl.dir, "purge", cl.env, os.Stderr); err != nil {
		return nil, err
	}
	cl.env = append(cl.env, "GT_NODES=system a100-whole")
	fmt.Fprintln(os.Stderr, "bench: nodes: the control plane with two real nodes")
	start = time.Now()
	if err := localcluster.Run(ctx, root, cl.dir, "up", cl.env, os.Stderr); err != nil {
		return nil, err
	}
	nodesUp := time.Since(start) - alone
	rss, err := nodesRSS(root)
	if err != nil {
		return nil, err
	}
	client, err := probe.Connect(filepath.Join(cl.dir, "kubeconfig"))
	if err != nil {
		return nil, err
	}
	class, template, pod := draplugin.GPUWorkload("default", "bench-gpu", "gpu", false)
	if _, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if _, err := client.ResourceV1().ResourceClaimTemplates("default").Create(ctx, template, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	start = time.Now()
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	for {
		p, err := client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if p.Status.Phase == corev1.PodRunning {
			break
		}
		if time.Since(start) > 3*time.Minute {
			return nil, fmt.Errorf("GPU pod not Running after 3 minutes: %+v", p.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	podRunning := time.Since(start)
	return []row{
		{what: "real nodes: start to Ready (kubelet, containerd, kube-proxy; the GPU node's plugin)", size: "2 nodes",
			wall: nodesUp, rssKiB: rss},
		{what: "GPU pod: create to Running (claim allocated and prepared through CDI)", size: "1 pod", wall: podRunning},
	}, nil
}

// nodesRSS sums the resident memory of the nodes' own processes: the tools' binaries running in another network
// namespace than this process's (each node's holder, containerd, kubelet, kube-proxy, GPU plugin and the containers'
// shims; the containers themselves run their images' copies and are not counted).
func nodesRSS(root string) (int64, error) {
	tools, err := filepath.EvalSymlinks(filepath.Join(root, ".tools"))
	if err != nil {
		return 0, err
	}
	self, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return 0, err
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var total int64
	for _, p := range procs {
		exe, err := os.Readlink(p + "/exe")
		if err != nil || !strings.HasPrefix(exe, tools+"/") {
			continue
		}
		if ns, err := os.Readlink(p + "/ns/net"); err != nil || ns == self {
			continue
		}
		status, err := os.ReadFile(p + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
				kib, _ := strconv.ParseInt(f[1], 10, 64)
				total += kib
			}
		}
	}
	return total, nil
}
