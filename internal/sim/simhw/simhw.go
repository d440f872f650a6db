// Package simhw puts simulated GPU hardware on a control plane that has no kubelets: the Nodes of
// the project's GPU pools and the ResourceSlices the NVIDIA DRA driver would publish for them
// (inventory in internal/sim/README.md). Pods that claim these devices get scheduled and their
// claims allocated; nothing runs. It also gives the cluster a default StorageClass, as the
// managed clusters the platform targets come with one.
package simhw

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// hardware holds the simulated GPU hardware, one multi-document YAML file per GPU pool (internal/sim/README.md).
//
//go:embed hardware/*.yaml
var hardware embed.FS

// Names in the simulated inventory.
const (
	// Driver is the DRA driver name the NVIDIA GPU plugin publishes under (kubernetes-sigs/dra-driver-nvidia-gpu
	// v0.4.0 docs/install.md).
	Driver = "gpu.nvidia.com"
	// PoolWhole holds whole A100 40GB GPUs (device gpu-0 on each node).
	PoolWhole = "a100-whole"
	// PoolMIG holds A100 40GB GPUs partitioned into 1g.5gb MIG devices.
	PoolMIG = "a100-mig"
)

// DefaultStorageClass is the cluster's default StorageClass, as GKE's standard-rwo and Kapsule's sbs-default are:
// the DefaultStorageClass admission plugin gives it to a volume claim of no class, the vCluster control plane's among
// them. Nothing provisions it here.
const DefaultStorageClass = "sim-default"

// IsDefaultClassAnnotation marks a cluster's default StorageClass (kubernetes v1.34.4
// pkg/volume/util/storageclass.go IsDefaultStorageClassAnnotation).
const IsDefaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// Hardware is the simulated inventory: GPU nodes and the driver's ResourceSlices for them.
type Hardware struct {
	Nodes  []corev1.Node
	Slices []resourcev1.ResourceSlice
}

// Load parses the embedded fixtures.
func Load() (*Hardware, error) {
	files, err := fs.Glob(hardware, "hardware/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing simulated hardware fixtures: %w", err)
	}
	hw := &Hardware{}
	for _, f := range files {
		data, err := hardware.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f, err)
		}
		if err := hw.decode(path.Base(f), data); err != nil {
			return nil, err
		}
	}
	return hw, nil
}

func (hw *Hardware) decode(file string, data []byte) error {
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	decoder := scheme.Codecs.UniversalDeserializer()
	for i := 0; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s document %d: %w", file, i, err)
		}
		if isBlank(doc) {
			continue
		}
		obj, _, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("decoding %s document %d: %w", file, i, err)
		}
		switch o := obj.(type) {
		case *corev1.Node:
			hw.Nodes = append(hw.Nodes, *o)
		case *resourcev1.ResourceSlice:
			hw.Slices = append(hw.Slices, *o)
		default:
			return fmt.Errorf("%s document %d: unexpected %T", file, i, obj)
		}
	}
}

// Apply creates (or brings back in line) the simulated nodes and their ResourceSlices, and makes the nodes
// schedulable.
func Apply(ctx context.Context, cs kubernetes.Interface) error {
	hw, err := Load()
	if err != nil {
		return err
	}
	uids := map[string]metav1.OwnerReference{}
	for i := range hw.Nodes {
		node, err := applyNode(ctx, cs, &hw.Nodes[i])
		if err != nil {
			return fmt.Errorf("applying simulated node %q: %w", hw.Nodes[i].Name, err)
		}
		uids[node.Name] = metav1.OwnerReference{
			APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true),
		}
	}
	for i := range hw.Slices {
		want := &hw.Slices[i]
		owner, ok := uids[ptr.Deref(want.Spec.NodeName, "")]
		if !ok {
			return fmt.Errorf("ResourceSlice %q: node %q is not in the fixtures", want.Name, ptr.Deref(want.Spec.NodeName, ""))
		}
		// The driver's kubelet plugin makes its Node the owner, so slices go when the node goes.
		want.OwnerReferences = []metav1.OwnerReference{owner}
		if err := applySlice(ctx, cs, want); err != nil {
			return fmt.Errorf("applying ResourceSlice %q: %w", want.Name, err)
		}
	}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: DefaultStorageClass,
		Annotations: map[string]string{IsDefaultClassAnnotation: "true"}},
		Provisioner: "kubernetes.io/no-provisioner", VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating StorageClass %q: %w", DefaultStorageClass, err)
	}
	return nil
}

// Remove deletes the simulated ResourceSlices and nodes and the default StorageClass; absent objects are not an
// error.
func Remove(ctx context.Context, cs kubernetes.Interface) error {
	hw, err := Load()
	if err != nil {
		return err
	}
	for _, s := range hw.Slices {
		err := cs.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ResourceSlice %q: %w", s.Name, err)
		}
	}
	for _, n := range hw.Nodes {
		err := cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting simulated node %q: %w", n.Name, err)
		}
	}
	err = cs.StorageV1().StorageClasses().Delete(ctx, DefaultStorageClass, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting StorageClass %q: %w", DefaultStorageClass, err)
	}
	return nil
}

// applyNode creates the node if needed, then sets its labels and taints to the fixture's and
// reports it Ready. The API server taints every new Node node.kubernetes.io/not-ready and, with
// the node lifecycle controller off (no kubelets), nothing would ever lift it: replacing the
// taints with the fixture's removes it.
func applyNode(ctx context.Context, cs kubernetes.Interface, want *corev1.Node) (*corev1.Node, error) {
	nodes := cs.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, want.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating: %w", err)
	}
	var node *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.Labels == nil {
			cur.Labels = map[string]string{}
		}
		for k, v := range want.Labels {
			cur.Labels[k] = v
		}
		cur.Spec.Taints = want.Spec.Taints
		cur.Spec.Unschedulable = false
		node, err = nodes.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("setting labels and taints: %w", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.Capacity = want.Status.Capacity
		cur.Status.Allocatable = want.Status.Allocatable
		cur.Status.Conditions = readyConditions(metav1.NewTime(time.Now()))
		node, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reporting Ready: %w", err)
	}
	return node, nil
}

// readyConditions are the conditions a healthy kubelet reports.
func readyConditions(now metav1.Time) []corev1.NodeCondition {
	cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: t, Status: s, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
	}
}

func applySlice(ctx context.Context, cs kubernetes.Interface, want *resourcev1.ResourceSlice) error {
	slices := cs.ResourceV1().ResourceSlices()
	_, err := slices.Create(ctx, want.DeepCopy(), metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := slices.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.OwnerReferences = want.OwnerReferences
		cur.Spec = want.Spec
		_, err = slices.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func isBlank(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && !bytes.Equal(line, []byte("---")) {
			return false
		}
	}
	return true
}
