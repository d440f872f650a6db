// Command promql-eval evaluates Prometheus alerting rules with Prometheus's own rule manager and PromQL engine, the
// way `promtool test rules` does (github.com/prometheus/prometheus@v0.316.0 cmd/promtool/unittest.go), but answers in
// JSON so that Go tests can assert on each alert. It lives in a tools module of its own because
// github.com/prometheus/prometheus v0.316.0 requires k8s.io/client-go v0.37, which would move the product's
// k8s.io modules off v0.34.
//
// It reads one JSON request on stdin:
//
//	{
//	  "rules":        <a Prometheus rule file, {"groups": [...]}>,
//	  "load":         "load 1m\n  metric{l=\"v\"} 0+1x10",  // promqltest series, sample 0 at "start"
//	  "exposition":   "<text exposition format>",           // or: one scrape, taken at "start"
//	  "targetLabels": {"job": "..."},                       // added to every exposed series, as a scrape would
//	  "start":        1767225600,                           // unix seconds of the first sample
//	  "interval":     "30s",                                // rule evaluation interval
//	  "evalTimes":    ["0s", "15m"]                         // offsets from start at which to report alerts
//	}
//
// and writes the metric names each rule reads, and the pending and firing alerts at each requested time.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

type request struct {
	Rules        json.RawMessage   `json:"rules"`
	Load         string            `json:"load"`
	Exposition   string            `json:"exposition"`
	TargetLabels map[string]string `json:"targetLabels"`
	Start        int64             `json:"start"`
	Interval     string            `json:"interval"`
	EvalTimes    []string          `json:"evalTimes"`
}

type response struct {
	// Selectors lists, per alerting rule, the metric names its expression selects.
	Selectors map[string][]string `json:"selectors"`
	Evals     []evaluation        `json:"evals"`
}

type evaluation struct {
	At     string  `json:"at"`
	Alerts []alert `json:"alerts"`
}

type alert struct {
	Name        string            `json:"name"`
	State       string            `json:"state"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Value       float64           `json:"value"`
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: promql-eval < request.json > response.json")
		os.Exit(2)
	}
	resp, err := run(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promql-eval:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(resp); err != nil {
		fmt.Fprintln(os.Stderr, "promql-eval:", err)
		os.Exit(1)
	}
}

func run(in io.Reader) (*response, error) {
	var req request
	dec := json.NewDecoder(in)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("decoding request: %w", err)
	}
	if len(req.Rules) == 0 {
		return nil, errors.New("request has no rules")
	}
	interval := 30 * time.Second
	if req.Interval != "" {
		d, err := model.ParseDuration(req.Interval)
		if err != nil {
			return nil, fmt.Errorf("interval: %w", err)
		}
		interval = time.Duration(d)
	}
	if interval <= 0 {
		return nil, fmt.Errorf("interval %s: must be positive", interval)
	}
	offsets := make([]time.Duration, 0, len(req.EvalTimes))
	for _, s := range req.EvalTimes {
		d, err := model.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("eval time %q: %w", s, err)
		}
		if time.Duration(d)%interval != 0 {
			return nil, fmt.Errorf("eval time %q: not a multiple of the evaluation interval %s", s, interval)
		}
		offsets = append(offsets, time.Duration(d))
	}
	load, err := series(req)
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "promql-eval-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	ruleFile := filepath.Join(dir, "rules.json")
	if err := os.WriteFile(ruleFile, req.Rules, 0o600); err != nil {
		return nil, err
	}

	// The parser a default Prometheus server loads and evaluates rules with: no optional syntax.
	p := parser.NewParser(parser.Options{})
	start := time.Unix(req.Start, 0).UTC()
	suite, err := promqltest.NewLazyLoader(load, promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, StartTime: start, Parser: p,
	})
	if err != nil {
		return nil, fmt.Errorf("loading series: %w", err)
	}
	defer suite.Close()
	suite.SubqueryInterval = interval

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
		Parser:       p,
	})
	groups, errs := m.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, ruleFile)
	if len(errs) > 0 {
		return nil, fmt.Errorf("loading rules: %w", errors.Join(errs...))
	}
	ordered := make([]*rules.Group, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	sort.Slice(ordered, func(i, j int) bool { return ordered[i].Name() < ordered[j].Name() })

	resp := &response{Selectors: map[string][]string{}}
	for _, g := range ordered {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok {
				continue
			}
			// Restored, as promtool marks them, so that a `for` clause counts from the first evaluation.
			ar.SetRestored(true)
			names, err := selectedMetrics(p, ar.Query().String())
			if err != nil {
				return nil, fmt.Errorf("rule %s: %w", ar.Name(), err)
			}
			resp.Selectors[ar.Name()] = names
		}
	}

	var last time.Duration
	for _, o := range offsets {
		last = max(last, o)
	}
	for off := time.Duration(0); off <= last; off += interval {
		ts := start.Add(off)
		var loadErr error
		suite.WithSamplesTill(ts, func(err error) {
			loadErr = err
			if err != nil {
				return
			}
			for _, g := range ordered {
				g.Eval(suite.Context(), ts)
			}
		})
		if loadErr != nil {
			return nil, fmt.Errorf("loading samples till %s: %w", ts, loadErr)
		}
		for _, g := range ordered {
			for _, r := range g.Rules() {
				if err := r.LastError(); err != nil {
					return nil, fmt.Errorf("evaluating %s at %s: %w", r.Name(), off, err)
				}
			}
		}
		for _, o := range offsets {
			if o == off {
				resp.Evals = append(resp.Evals, evaluation{At: model.Duration(off).String(), Alerts: activeAlerts(ordered)})
			}
		}
	}
	return resp, nil
}

// series returns the request's samples as a promqltest load command: the load itself, or the exposition as one
// sample per series at the start time.
func series(req request) (string, error) {
	switch {
	case req.Load != "" && req.Exposition != "":
		return "", errors.New("give either load or exposition, not both")
	case req.Load != "":
		return req.Load, nil
	case req.Exposition == "":
		return "", errors.New("request has neither load nor exposition")
	}
	tp := expfmt.NewTextParser(model.UTF8Validation)
	families, err := tp.TextToMetricFamilies(strings.NewReader(req.Exposition))
	if err != nil {
		return "", fmt.Errorf("parsing exposition: %w", err)
	}
	var lines []string
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			b := labels.NewBuilder(labels.EmptyLabels())
			b.Set(labels.MetricName, name)
			for _, lp := range m.GetLabel() {
				b.Set(lp.GetName(), lp.GetValue())
			}
			// A scrape without honor_labels would rename a clashing exposed label; the scrape objects this
			// project renders keep the exposed ones, so target labels only fill what is missing.
			for k, v := range req.TargetLabels {
				if b.Get(k) == "" {
					b.Set(k, v)
				}
			}
			var v float64
			switch {
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetUntyped() != nil:
				v = m.GetUntyped().GetValue()
			default:
				return "", fmt.Errorf("metric %s: only gauges, counters and untyped metrics are supported", name)
			}
			lines = append(lines, "  "+b.Labels().String()+" "+formatValue(v))
		}
	}
	sort.Strings(lines)
	return "load 1m\n" + strings.Join(lines, "\n") + "\n", nil
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// selectedMetrics lists the metric names an expression's vector selectors name, sorted and unique.
func selectedMetrics(p parser.Parser, expr string) ([]string, error) {
	node, err := p.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var missing error
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name == "" {
			missing = fmt.Errorf("selector %s names no metric", vs)
			return nil
		}
		seen[vs.Name] = true
		return nil
	})
	if missing != nil {
		return nil, missing
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

func activeAlerts(groups []*rules.Group) []alert {
	out := []alert{}
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok {
				continue
			}
			for _, a := range ar.ActiveAlerts() {
				out = append(out, alert{
					Name: ar.Name(), State: a.State.String(), Labels: a.Labels.Map(),
					Annotations: a.Annotations.Map(), Value: a.Value,
				})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return labels.FromMap(out[i].Labels).String() < labels.FromMap(out[j].Labels).String()
	})
	return out
}
