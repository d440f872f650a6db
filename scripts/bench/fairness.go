package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The load of the fairness part: 64 concurrent requests for 20 s with one tenant's syncer token, against an API
// server with its default concurrency (600 seats), on a control plane of its own.
const (
	floodClients = 64
	floodFor     = 20 * time.Second
	settleFor    = 2 * time.Second
	// fairnessTarget is how much slower the other tenant's requests may get under the flood, at p50 and p99.
	fairnessTarget = 2.0
)

// benchFairness measures what API Priority and Fairness does for the others while one tenant floods the API server
// with its syncer's own token: the other tenant's syncer and the DRA driver each GET in a loop and their latencies are
// timed, without and with the flood, with the platform's FlowSchemas and after they are deleted (every service account
// then falls into the bootstrap service-accounts schema at workload-low). It returns lines to print; it asserts
// nothing.
func benchFairness(ctx context.Context, root string) ([]string, error) {
	cl, done, err := localStackUp(ctx, root, "fairness")
	defer done()
	if err != nil {
		return nil, err
	}

	flooder, victim := "legal-ai", "research-ai"
	driverNS := naming.DriverNamespace
	if err := driverAccount(ctx, cl, driverNS); err != nil {
		return nil, err
	}
	clients := map[string]*loadClient{}
	for who, sa := range map[string][2]string{
		"flood":  {naming.Namespace(flooder), "vc-" + flooder},
		"tenant": {naming.Namespace(victim), "vc-" + victim},
		"driver": {driverNS, "kubelet-plugin"},
	} {
		if clients[who], err = newLoadClient(ctx, cl, sa[0], sa[1]); err != nil {
			return nil, err
		}
	}
	paths := map[string]string{
		"flood": "/api/v1/namespaces/" + naming.Namespace(flooder) + "/pods",
		// A long-running request (a log, as exec, attach, port-forward and proxy), which API Priority and Fairness
		// serves without a seat or a queue (k8s.io/apiserver v0.34.4 pkg/server/filters/priority-and-fairness.go; the
		// long-running check: kubernetes v1.34.4 pkg/controlplane/apiserver/config.go), of a pod that is not there.
		"flood-log": "/api/v1/namespaces/" + naming.Namespace(flooder) + "/pods/none/log",
		"tenant":    "/api/v1/namespaces/" + naming.Namespace(victim) + "/pods?limit=1",
		"driver":    "/apis/resource.k8s.io/v1/resourceslices?limit=1",
	}

	lines := []string{"", fmt.Sprintf("API FAIRNESS: tenant %s's syncer token floods (%d concurrent LISTs, or log requests of a pod that "+
		"is not there, for %s) while tenant %s's syncer and the DRA driver each GET in a loop; kube-apiserver with its default concurrency",
		flooder, floodClients, floodFor, victim)}
	var verdicts []string
	table := [][]string{{"WHO", "FLOWSCHEMAS", "FLOOD", "P50", "P99", "SERVED", "429s"}}
	under := map[string]latencies{}
	for _, schemas := range []bool{true, false} {
		if !schemas {
			if err := deleteFairness(ctx, cl); err != nil {
				return lines, err
			}
		}
		floods := []string{"", "flood"}
		if schemas {
			floods = append(floods, "flood-log")
		}
		for _, flood := range floods {
			fmt.Fprintf(os.Stderr, "bench: fairness: flow schemas %v, flood %q\n", schemas, flood)
			res := measureFairness(ctx, clients, paths, flood)
			if schemas {
				under[flood] = res["tenant"]
			}
			for _, who := range []string{"tenant", "driver", "flood"} {
				r, ok := res[who]
				if !ok {
					continue
				}
				label := map[string]string{"tenant": "other tenant's syncer", "driver": "DRA driver", "flood": "flooding tenant"}[who]
				table = append(table, []string{label, onOff(schemas), map[string]string{"": "off", "flood": "LISTs", "flood-log": "logs"}[flood],
					ms(r.percentile(50)), ms(r.percentile(99)), fmt.Sprint(r.served), fmt.Sprint(r.rejected)})
			}
		}
	}
	for _, p := range []int{50, 99} {
		before, during := under[""].percentile(p), under["flood"].percentile(p)
		if before == 0 || during == 0 {
			continue
		}
		ratio := during.Seconds() / before.Seconds()
		verdict := "met"
		if ratio > fairnessTarget {
			verdict = "MISSED"
		}
		verdicts = append(verdicts, fmt.Sprintf("other tenant's p%d under the flood, with the platform's flow schemas: %s against %s "+
			"without it, x%.2f (target x%.0f): %s", p, ms(during), ms(before), ratio, fairnessTarget, verdict))
	}
	for _, p := range []int{50, 99} {
		if before, during := under[""].percentile(p), under["flood-log"].percentile(p); before > 0 && during > 0 {
			verdicts = append(verdicts, fmt.Sprintf("other tenant's p%d under a flood of log requests, which no priority level queues: "+
				"%s against %s, x%.2f (not bounded: docs/benchmarks.md, \"API fairness\")", p, ms(during), ms(before), during.Seconds()/before.Seconds()))
		}
	}
	return append(append(lines, formatTable(table)...), verdicts...), nil
}

// driverAccount plays the DRA driver's kubelet plugin: a service account in the driver's namespace that may read
// ResourceSlices.
func driverAccount(ctx context.Context, cl *benchCluster, ns string) error {
	cs := cl.client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kubelet-plugin"}},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "bench-dra-driver"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-dra-driver"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "bench-dra-driver"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kubelet-plugin", Namespace: ns}},
	}, metav1.CreateOptions{})
	return err
}

// deleteFairness removes the platform's flow schemas and priority levels, as a cluster without them would be.
func deleteFairness(ctx context.Context, cl *benchCluster) error {
	fc := cl.client.FlowcontrolV1()
	list, err := fc.FlowSchemas().List(ctx, metav1.ListOptions{LabelSelector: naming.ManagedByLabel + "=" + naming.ManagedBy})
	if err != nil {
		return err
	}
	for _, fs := range list.Items {
		if err := fc.FlowSchemas().Delete(ctx, fs.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	levels, err := fc.PriorityLevelConfigurations().List(ctx, metav1.ListOptions{LabelSelector: naming.ManagedByLabel + "=" + naming.ManagedBy})
	if err != nil {
		return err
	}
	for _, l := range levels.Items {
		if err := fc.PriorityLevelConfigurations().Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	time.Sleep(settleFor) // the API server's flow-control configuration follows its informers
	return nil
}

// loadClient sends GETs with one service account's token.
type loadClient struct {
	host string
	http *http.Client
	cfg  *rest.Config
}

// clientset is a typed client with the load client's token.
func (c *loadClient) clientset() (kubernetes.Interface, error) { return kubernetes.NewForConfig(c.cfg) }

func newLoadClient(ctx context.Context, cl *benchCluster, ns, sa string) (*loadClient, error) {
	token, err := cl.client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of %s/%s: %w", ns, sa, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.kubeconfig)
	if err != nil {
		return nil, err
	}
	anon := rest.AnonymousClientConfig(cfg)
	anon.BearerToken = token.Status.Token
	anon.QPS, anon.Burst = 1000, 1000
	return loadClientFor(anon)
}

// loadClientFor is a load client that sends GETs as cfg says, with cfg's credentials.
func loadClientFor(cfg *rest.Config) (*loadClient, error) {
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	return &loadClient{host: cfg.Host, http: &http.Client{Transport: transport, Timeout: 70 * time.Second}, cfg: cfg}, nil
}

// get sends one GET and reports its latency and whether the API server turned it away (429).
func (c *loadClient) get(ctx context.Context, path string) (time.Duration, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.host+path, nil)
	if err != nil {
		return 0, false, err
	}
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, false, err
	}
	resp.Body.Close()
	return time.Since(start), resp.StatusCode == http.StatusTooManyRequests, nil
}

// latencies of the requests one client got served, and how many it sent and had turned away.
type latencies struct {
	latencies []time.Duration
	served    int64
	rejected  int64
}

func (l latencies) percentile(p int) time.Duration {
	if len(l.latencies) == 0 {
		return 0
	}
	s := slices.Clone(l.latencies)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// measureFairness runs the two measured clients in a loop for floodFor, beside the flood of the path named flood (none
// when empty).
func measureFairness(ctx context.Context, clients map[string]*loadClient, paths map[string]string, flood string) map[string]latencies {
	ctx, cancel := context.WithTimeout(ctx, floodFor)
	defer cancel()
	var mu sync.Mutex
	out := map[string]latencies{}
	var wg sync.WaitGroup
	run := func(who string) {
		defer wg.Done()
		var mine latencies
		for ctx.Err() == nil {
			d, rejected, err := clients[who].get(ctx, paths[who])
			if err != nil {
				continue
			}
			if rejected {
				mine.rejected++
				continue
			}
			mine.served++
			mine.latencies = append(mine.latencies, d)
		}
		mu.Lock()
		out[who] = mine
		mu.Unlock()
	}
	for _, who := range []string{"tenant", "driver"} {
		wg.Add(1)
		go run(who)
	}
	if flood != "" {
		served, rejected, err := floodFromChild(ctx, clients["flood"], paths[flood])
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: fairness:", err)
		}
		mu.Lock()
		// The flood's own latencies are not what this measures, only how much of it got through.
		out["flood"] = latencies{served: served, rejected: rejected}
		mu.Unlock()
	}
	wg.Wait()
	return out
}

// floodSpec is what the flooding process is given: one service account's client and the path it LISTs.
type floodSpec struct {
	Host, Token string
	TLS         rest.TLSClientConfig
	Path        string
	Clients     int
}

// floodFromChild floods from a process of its own until ctx is done, and returns what the flood got served and turned
// away. On a cluster a tenant's clients run on its nodes, not on the control plane's CPUs; here they share them, so
// the flooding process runs apart, at the lowest CPU priority. In the measuring process the flood's goroutines queued
// the measured clients' goroutines behind them in the Go scheduler, and at the same priority the flood's own TLS and
// HTTP/2 work took CPU from the API server: both are the benchmark's cost, not the API server's. Neither weakens the
// flood, whose requests wait in the API server's queues whatever its pace (the SERVED column).
func floodFromChild(ctx context.Context, c *loadClient, path string) (served, rejected int64, err error) {
	spec, err := json.Marshal(floodSpec{Host: c.cfg.Host, Token: c.cfg.BearerToken, TLS: c.cfg.TLSClientConfig, Path: path, Clients: floodClients})
	if err != nil {
		return 0, 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(self, "-flood")
	cmd.Stdin, cmd.Stderr = bytes.NewReader(spec), os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, 19); err != nil {
		fmt.Fprintln(os.Stderr, "bench: fairness: lowering the flooding process's priority:", err)
	}
	<-ctx.Done()
	_ = cmd.Process.Signal(os.Interrupt)
	var counts [2]int64
	decodeErr := json.NewDecoder(stdout).Decode(&counts)
	if err := cmd.Wait(); err != nil {
		return 0, 0, fmt.Errorf("the flooding process: %w", err)
	}
	return counts[0], counts[1], decodeErr
}

// floodChild is the flooding process: it reads a floodSpec on stdin, LISTs with its clients until interrupted, then
// writes how many requests were served and how many turned away.
func floodChild() error {
	var spec floodSpec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := loadClientFor(&rest.Config{Host: spec.Host, BearerToken: spec.Token, TLSClientConfig: spec.TLS})
	if err != nil {
		return err
	}
	var served, rejected atomic.Int64
	var wg sync.WaitGroup
	for range spec.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, r, err := c.get(ctx, spec.Path); err == nil {
					if r {
						rejected.Add(1)
					} else {
						served.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	return json.NewEncoder(os.Stdout).Encode([2]int64{served.Load(), rejected.Load()})
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

// formatTable lays rows out in columns two spaces apart.
func formatTable(rows [][]string) []string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	out := make([]string, len(rows))
	for j, r := range rows {
		var b strings.Builder
		for i, c := range r {
			fmt.Fprintf(&b, "%-*s  ", widths[i], c)
		}
		out[j] = strings.TrimRight(b.String(), " ")
	}
	return out
}
