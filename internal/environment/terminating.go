package environment

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// terminatingPoll is how often a running operation looks at the stack's terminating namespaces.
const terminatingPoll = 5 * time.Second

// namespaceBlockers are the conditions the namespace controller sets on a terminating namespace to say what it
// waits for (k8s.io/api v0.34 core/v1 types.go, NamespaceConditionType).
var namespaceBlockers = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure, corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure, corev1.NamespaceContentRemaining, corev1.NamespaceFinalizersRemaining,
}

// terminationWatch reports, while an operation runs, each of the stack's namespaces that is terminating and what it
// waits for, whenever that changes; the engine's own progress only says that a deletion is under way.
type terminationWatch struct {
	client kubernetes.Interface
	owner  string
	say    func(format string, args ...any)

	mu   sync.Mutex
	last map[string]string // namespace -> what it waits for, as last reported
}

// watchTerminating starts a terminationWatch on the cluster of the stack's kubeconfig output, if it has one. The
// returned function stops it and, when err is not nil and namespaces are still terminating, adds why to err.
func (s *Stack) watchTerminating(ctx context.Context) func(err error) error {
	client := s.clusterClient(ctx)
	if client == nil {
		return func(err error) error { return err }
	}
	w := &terminationWatch{client: client, owner: naming.StackOwner(projectName, s.opts.Stack), say: s.say,
		last: map[string]string{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(terminatingPoll)
		defer ticker.Stop()
		for {
			w.poll(ctx)
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	return func(err error) error {
		cancel()
		<-done
		if err == nil {
			return nil
		}
		// One last look: the operation may have failed on the very deletion this reports.
		w.poll(context.Background())
		return w.explain(err)
	}
}

// clusterClient is a client of the cluster the stack's kubeconfig output names, or nil when there is none.
func (s *Stack) clusterClient(ctx context.Context) kubernetes.Interface {
	cfg := s.clusterConfig(ctx)
	if cfg == nil {
		return nil
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil
	}
	return client
}

// clusterConfig reaches the cluster the stack's kubeconfig output names; nil when there is none.
func (s *Stack) clusterConfig(ctx context.Context) *rest.Config {
	outputs, err := s.Outputs(ctx)
	if err != nil {
		return nil
	}
	kubeconfig, _ := outputs["kubeconfig"].Value.(string)
	if kubeconfig == "" {
		return nil
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return nil
	}
	cfg.Timeout = 15 * time.Second
	return cfg
}

func (w *terminationWatch) poll(ctx context.Context) {
	list, err := w.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: naming.StackLabel + "=" + w.owner})
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for i := range list.Items {
		ns := &list.Items[i]
		if ns.DeletionTimestamp == nil {
			continue
		}
		seen[ns.Name] = true
		why := w.waitsFor(ctx, ns)
		if w.last[ns.Name] != why {
			w.say("waiting for namespace %s to terminate (for %s): %s", ns.Name,
				time.Since(ns.DeletionTimestamp.Time).Round(time.Second), why)
			w.last[ns.Name] = why
		}
	}
	for name := range w.last {
		if !seen[name] {
			delete(w.last, name)
		}
	}
}

// waitsFor says what a terminating namespace waits for: the namespace controller's conditions, and for pods that
// do not go away, the node each is on and whether that node still answers.
func (w *terminationWatch) waitsFor(ctx context.Context, ns *corev1.Namespace) string {
	var reasons []string
	for _, c := range ns.Status.Conditions {
		if c.Status == corev1.ConditionTrue && slices.Contains(namespaceBlockers, c.Type) {
			reasons = append(reasons, c.Message)
		}
	}
	if len(reasons) == 0 {
		return "its objects are being deleted"
	}
	pods, err := w.client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				continue
			}
			reasons = append(reasons, fmt.Sprintf("pod %s is terminating%s", p.Name, w.nodeState(ctx, p.Spec.NodeName)))
		}
	}
	return strings.Join(reasons, "; ")
}

// nodeState names the node a pod is on and, when its kubelet no longer reports, says that the pod cannot finish
// until the node is back or the pod is force-deleted.
func (w *terminationWatch) nodeState(ctx context.Context, name string) string {
	if name == "" {
		return ""
	}
	node, err := w.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return " on node " + name + ", which no longer exists: force-delete it (kubectl delete pod --force --grace-period=0)"
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf(" on node %s, whose kubelet does not answer (Ready=%s since %s): once the node is gone, "+
				"force-delete the pod (kubectl delete pod --force --grace-period=0)", name, c.Status, c.LastTransitionTime.Format(time.RFC3339))
		}
	}
	return " on node " + name
}

// explain adds to err what each namespace that is still terminating waits for.
func (w *terminationWatch) explain(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.last) == 0 {
		return err
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(w.last)) {
		lines = append(lines, fmt.Sprintf("namespace %s is still terminating: %s", name, w.last[name]))
	}
	return errors.Join(err, errors.New(strings.Join(lines, "\n")+
		"\n(the wait is bounded by gpu-tenancy:timeouts.namespaceDeletion; run the operation again once this is resolved)"))
}
