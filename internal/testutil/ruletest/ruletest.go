// Package ruletest runs the platform's alert rules through Prometheus's own rule evaluator, and kube-state-metrics
// against a cluster, for tests. Both are binaries built by scripts/build-tools.sh into .tools/bin from tool modules
// (scripts/tools/promql-eval, scripts/tools/k8s-0.36), because their modules require k8s.io modules newer
// than the product's.
package ruletest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/dashboard"
	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/syncbuf"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/toolbin"
)

// Tool names in .tools/bin.
const (
	PromQLEval       = "promql-eval"
	KubeStateMetrics = "kube-state-metrics"
)

// Request asks promql-eval to evaluate a rule file over some series (scripts/tools/promql-eval/main.go).
type Request struct {
	Rules rules.File `json:"rules"`
	// Load is a promqltest load command; its first sample is at Start.
	Load string `json:"load,omitempty"`
	// Exposition is one scrape in the text exposition format, taken at Start, with TargetLabels added.
	Exposition   string            `json:"exposition,omitempty"`
	TargetLabels map[string]string `json:"targetLabels,omitempty"`
	// Start is the unix time of the first sample.
	Start int64 `json:"start"`
	// Interval is the rule evaluation interval, a Prometheus duration.
	Interval string `json:"interval,omitempty"`
	// EvalTimes are offsets from Start, Prometheus durations, at which to report alerts.
	EvalTimes []string `json:"evalTimes"`
}

// Response is what promql-eval reports.
type Response struct {
	// Selectors are, per alert name, the metric names its expression selects.
	Selectors map[string][]string `json:"selectors"`
	Evals     []Evaluation        `json:"evals"`
}

// Evaluation holds the active alerts at one eval time.
type Evaluation struct {
	At     string  `json:"at"`
	Alerts []Alert `json:"alerts"`
}

// Alert is one pending or firing alert.
type Alert struct {
	Name        string            `json:"name"`
	State       string            `json:"state"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Value       float64           `json:"value"`
}

// At returns the alerts active at an eval time, in the given state, named name (any name when empty).
func (r *Response) At(at, name, state string) []Alert {
	var out []Alert
	for _, e := range r.Evals {
		if e.At != at {
			continue
		}
		for _, a := range e.Alerts {
			if (name == "" || a.Name == name) && a.State == state {
				out = append(out, a)
			}
		}
	}
	return out
}

// Eval runs promql-eval on req.
func Eval(ctx context.Context, req Request) (*Response, error) {
	bin, err := toolbin.Path(PromQLEval)
	if err != nil {
		return nil, err
	}
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w: %s", PromQLEval, err, strings.TrimSpace(stderr.String()))
	}
	var resp Response
	if err := json.Unmarshal(stdout.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("decoding %s output: %w", PromQLEval, err)
	}
	return &resp, nil
}

// KubeStateMetricsProcess is a kube-state-metrics started against a cluster, listening on loopback.
type KubeStateMetricsProcess struct {
	// URL is the metrics endpoint.
	URL string
	cmd *exec.Cmd
	log *syncbuf.Buffer
	// done is closed when the process has exited.
	done chan struct{}
}

// StartKubeStateMetrics starts the built kube-state-metrics with the given flags against kubeconfig, on free
// loopback ports, and waits until it serves metrics.
func StartKubeStateMetrics(ctx context.Context, kubeconfig string, flags []string) (*KubeStateMetricsProcess, error) {
	bin, err := toolbin.Path(KubeStateMetrics)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	telemetry, err := freePort()
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--host=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--telemetry-host=127.0.0.1", "--telemetry-port=" + strconv.Itoa(telemetry),
	}, flags...)
	p := &KubeStateMetricsProcess{
		URL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port),
		cmd: exec.Command(bin, args...), log: &syncbuf.Buffer{}, done: make(chan struct{}),
	}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", telemetry)
	for {
		if code, _, err := get(ctx, readyz); err == nil && code == http.StatusOK {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("kube-state-metrics exited during start-up: %s", p.Log())
		case <-ctx.Done():
			_ = p.Stop()
			return nil, fmt.Errorf("kube-state-metrics not ready at %s: %w; log: %s", readyz, ctx.Err(), p.Log())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Scrape reads the metrics in the text exposition format, as a Prometheus scrape without OpenMetrics would.
func (p *KubeStateMetricsProcess) Scrape(ctx context.Context) (string, error) {
	code, body, err := get(ctx, p.URL)
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("scraping %s: HTTP %d: %s", p.URL, code, body)
	}
	return body, nil
}

// Log is what the process wrote so far.
func (p *KubeStateMetricsProcess) Log() string { return p.log.String() }

// Stop ends the process (its own pid only) and waits for it.
func (p *KubeStateMetricsProcess) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		return p.cmd.Process.Kill()
	}
}

// Series returns the exposition lines of one metric whose labels contain every given name="value" pair.
func Series(exposition, metric string, labels map[string]string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		all := true
		for k, v := range labels {
			all = all && strings.Contains(line, k+"="+strconv.Quote(v))
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

func get(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// PanelRule names the alerting rule that stands for query i of a panel in PanelRules.
func PanelRule(panel dashboard.Panel, i int) string {
	return fmt.Sprintf("%s [%d]", panel.Title, i)
}

// PanelRules are the queries of the panels of rows that keep selects, each as an alerting rule (named by PanelRule)
// that holds for no time, so that Eval reports every series the query returns as a firing alert, and the metric
// names it selects; the map gives each rule's query.
func PanelRules(rows []dashboard.Row, keep func(dashboard.Panel) bool) ([]rules.Rule, map[string]dashboard.Query) {
	var rs []rules.Rule
	of := map[string]dashboard.Query{}
	for _, row := range rows {
		for _, panel := range row.Panels {
			if !keep(panel) {
				continue
			}
			for i, q := range panel.Queries {
				name := PanelRule(panel, i)
				rs = append(rs, rules.Rule{Name: name, Expr: q.Expr, Severity: rules.Info})
				of[name] = q
			}
		}
	}
	return rs, of
}

// legendLabel is a label a Grafana legend format names, {{ label }}.
var legendLabel = regexp.MustCompile(`{{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*}}`)

// LegendLabels are the labels a legend format names.
func LegendLabels(legend string) []string {
	var out []string
	for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
		out = append(out, m[1])
	}
	return out
}
