// Command sim-dra-plugin is the simulated NVIDIA DRA kubelet plugin of the local stack's real GPU nodes
// (scripts/local-nodes.sh starts one in each GPU node's namespaces; internal/sim/draplugin says what it does). It
// registers with the node's kubelet through k8s.io/dynamic-resource-allocation's kubelet plugin library, under the
// driver's name, publishes the node's devices and prepares claims through CDI until SIGTERM.
//
//	sim-dra-plugin -node a100-whole-1 -pool a100-whole -kubeconfig KUBELET_KUBECONFIG -cdi-dir /run/cdi -dev-dir DIR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/draplugin"
	"github.com/gpu-tenancy/gpu-tenancy/internal/sim/simhw"
	"golang.org/x/sys/unix"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
)

func main() {
	node := flag.String("node", "", "the node's name")
	pool := flag.String("pool", "", "the node's GPU pool in the simulated hardware (a100-whole, a100-mig)")
	kubeconfig := flag.String("kubeconfig", "", "the node's kubeconfig: the Node authorizer lets a node publish its own slices and read the claims of its pods")
	cdiDir := flag.String("cdi-dir", "/run/cdi", "where containerd reads CDI specs")
	devDir := flag.String("dev-dir", "", "where the stand-in device nodes are made")
	klog.InitFlags(nil)
	flag.Parse()
	if *node == "" || *pool == "" || *kubeconfig == "" || *devDir == "" {
		fail(fmt.Errorf("-node, -pool, -kubeconfig and -dev-dir are required"))
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, *node, *pool, *kubeconfig, *cdiDir, *devDir); err != nil {
		fail(err)
	}
}

func run(ctx context.Context, node, pool, kubeconfig, cdiDir, devDir string) error {
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	devices, err := draplugin.Devices(pool)
	if err != nil {
		return err
	}
	plugin := &draplugin.Plugin{Node: node, Devices: map[string]resourceapi.Device{}, CDIDir: cdiDir, DevDir: devDir}
	for _, d := range devices {
		plugin.Devices[d.Name] = d
	}
	if err := plugin.MakeDeviceNodes(func(path string, major, minor uint32) error {
		return unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(major, minor)))
	}); err != nil {
		return err
	}
	// The library's default socket directory, which the NVIDIA driver's DaemonSet mounts from the host.
	if err := os.MkdirAll(filepath.Join("/var/lib/kubelet/plugins", simhw.Driver), 0o750); err != nil {
		return err
	}
	helper, err := kubeletplugin.Start(ctx, plugin, kubeletplugin.DriverName(simhw.Driver),
		kubeletplugin.KubeClient(client), kubeletplugin.NodeName(node))
	if err != nil {
		return fmt.Errorf("registering with the kubelet: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		node: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}); err != nil {
		return err
	}
	klog.InfoS("serving", "driver", simhw.Driver, "node", node, "devices", len(devices))
	<-ctx.Done()
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sim-dra-plugin:", err)
	os.Exit(1)
}
