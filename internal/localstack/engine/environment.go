package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
)

// Environment is the stacks of one environment: the stack named by Options.Stack and, when its config splits it
// into tenant groups (gpu-tenancy:tenantGroups), one stack per group, <stack>.tenants-<i>, each with the same stack
// file and its own part (platform.Part). One command drives them all: Up brings the platform stack up, then the
// groups in parallel; Destroy takes the groups down in parallel, then the platform; Preview and Recover run every
// stack.
type Environment struct {
	// Stacks are the platform stack first, then the groups in order; one stack without tenant groups.
	Stacks []*Stack
	// Parallel is how many group stacks run at once (default the number of CPUs): the engine's work is CPU-bound.
	// Destroy, which mostly waits, runs every group at once.
	Parallel int
	// OnlyChanged makes Up skip a stack whose last up through the environment applied what it would apply now: the
	// same program, the config of its part, and for a group's stack the same platform kubeconfig. One tenant added
	// to a large environment then runs the platform stack and that tenant's group only. A skipped stack is not
	// refreshed, so drift in it is neither seen nor put back: an Up without OnlyChanged does that.
	OnlyChanged bool
	// Skipped are the stacks the last Up skipped.
	Skipped []string
}

// Changes are the steps of an operation by kind, summed over the environment's stacks.
type Changes map[string]int

func (c Changes) add(m map[string]int) {
	for k, v := range m {
		c[k] += v
	}
}

// OpenEnvironment opens every stack of the environment (Open, for each, platform.EnvironmentStacks), each reading
// the environment's stack file; each stack's name says which part it builds.
func OpenEnvironment(ctx context.Context, o Options) (*Environment, error) {
	from := o.ConfigFrom
	if from == "" {
		from = o.Stack
	}
	sc, err := platform.ReadStackFile(filepath.Join(o.RepoRoot, "stacks", "Pulumi."+from+".yaml"))
	if err != nil {
		return nil, err
	}
	groupsKey := platform.ConfigNamespace + ":tenantGroups"
	if raw, ok := o.Config[groupsKey]; ok {
		sc.Values[groupsKey] = raw
	}
	stacks, err := platform.EnvironmentStacks(o.Stack, sc)
	if err != nil {
		return nil, err
	}
	env := &Environment{}
	for _, name := range stacks {
		po := o
		po.Stack, po.ConfigFrom = name, from
		if len(stacks) > 1 {
			po.Progress = prefixed(o.Progress, o.Stack, platform.PartOf(name, len(stacks)-1))
		}
		if name != o.Stack && o.WorkDir != "" {
			po.WorkDir = o.WorkDir + strings.TrimPrefix(name, o.Stack)
		}
		st, err := Open(ctx, po)
		if err != nil {
			return nil, err
		}
		env.Stacks = append(env.Stacks, st)
	}
	return env, nil
}

// Up brings the platform stack up, then every group in parallel. With OnlyChanged, a stack whose last up through
// the environment applied what it would apply now is skipped and named in Skipped.
func (e *Environment) Up(ctx context.Context, opts ...optup.Option) (Changes, error) {
	changes := Changes{}
	var mu sync.Mutex
	e.Skipped = nil
	up := func(s *Stack, upstream string) (map[string]int, error) {
		if e.OnlyChanged && s.unchanged(upstream) {
			s.say("%s: unchanged since its last up (the same program, config and cluster): skipped, not refreshed", s.opts.Stack)
			mu.Lock()
			defer mu.Unlock()
			e.Skipped = append(e.Skipped, s.opts.Stack)
			return nil, nil
		}
		res, err := s.Up(ctx, opts...)
		var counts map[string]int
		if res.Summary.ResourceChanges != nil {
			counts = *res.Summary.ResourceChanges
		}
		if err == nil {
			err = s.recordApplied(upstream)
		}
		return counts, err
	}
	counts, err := up(e.Stacks[0], "")
	changes.add(counts)
	if err != nil || len(e.Stacks) == 1 {
		return changes, err
	}
	// A group's stack reaches the cluster through the platform stack's kubeconfig: when that changes, so does
	// what the group's up applies.
	outputs, err := e.Stacks[0].Outputs(ctx)
	if err != nil {
		return changes, fmt.Errorf("stack %s: reading its outputs: %w", e.Stacks[0].opts.Stack, err)
	}
	upstream := fmt.Sprint(outputs["kubeconfig"].Value)
	err = e.eachGroup(func(s *Stack) (map[string]int, error) { return up(s, upstream) }, changes)
	return changes, err
}

// Preview previews every stack, the groups in parallel after the platform.
func (e *Environment) Preview(ctx context.Context, opts ...optpreview.Option) (Changes, error) {
	changes := Changes{}
	preview := func(s *Stack) (map[string]int, error) {
		res, err := s.Preview(ctx, opts...)
		counts := map[string]int{}
		for op, n := range res.ChangeSummary {
			counts[string(op)] = n
		}
		return counts, err
	}
	counts, err := preview(e.Stacks[0])
	changes.add(counts)
	if err != nil {
		return changes, err
	}
	return changes, e.eachGroup(preview, changes)
}

// Destroy takes every group down in parallel, then the platform stack.
func (e *Environment) Destroy(ctx context.Context) (Changes, error) {
	changes := Changes{}
	destroy := func(s *Stack) (map[string]int, error) {
		res, err := s.Destroy(ctx)
		if res.Summary.ResourceChanges == nil {
			return nil, err
		}
		return *res.Summary.ResourceChanges, err
	}
	// A destroy mostly waits, for each tenant namespace to terminate, rather than computes: every group at once.
	if err := e.eachGroupAtOnce(len(e.Stacks), destroy, changes); err != nil {
		return changes, err
	}
	counts, err := destroy(e.Stacks[0])
	changes.add(counts)
	return changes, err
}

// Recover recovers every stack (Stack.Recover): for an up, the platform first; for a destroy, the groups first.
func (e *Environment) Recover(ctx context.Context, op Op) error {
	if op == "" {
		for _, s := range e.Stacks {
			if op = s.Interrupted(); op != "" {
				break
			}
		}
	}
	recover := func(s *Stack) (map[string]int, error) { return nil, s.Recover(ctx, op) }
	if op == OpDestroy {
		if err := e.eachGroup(recover, Changes{}); err != nil {
			return err
		}
		return e.Stacks[0].Recover(ctx, op)
	}
	if err := e.Stacks[0].Recover(ctx, op); err != nil {
		return err
	}
	return e.eachGroup(recover, Changes{})
}

// eachGroup runs f on every group stack, Parallel at a time, adds what each returns to changes, and joins their
// errors, each naming its stack. Every group runs even when another fails: they are independent.
func (e *Environment) eachGroup(f func(*Stack) (map[string]int, error), changes Changes) error {
	parallel := e.Parallel
	if parallel <= 0 {
		parallel = runtime.NumCPU()
	}
	return e.eachGroupAtOnce(parallel, f, changes)
}

// eachGroupAtOnce is eachGroup with parallel group stacks at a time.
func (e *Environment) eachGroupAtOnce(parallel int, f func(*Stack) (map[string]int, error), changes Changes) error {
	slots := make(chan struct{}, parallel)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, s := range e.Stacks[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			counts, err := f(s)
			mu.Lock()
			defer mu.Unlock()
			changes.add(counts)
			if err != nil {
				errs = append(errs, fmt.Errorf("stack %s: %w", s.opts.Stack, err))
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prefixed writes each line to w with the stack's part before it, so that the progress of stacks that run at once
// can be told apart; nil stays nil.
func prefixed(w io.Writer, stack string, part platform.Part) io.Writer {
	if w == nil {
		return nil
	}
	return &linePrefixer{w: w, prefix: []byte(fmt.Sprintf("[%s %s] ", stack, part))}
}

type linePrefixer struct {
	mu      sync.Mutex
	w       io.Writer
	prefix  []byte
	partial []byte
}

func (l *linePrefixer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := append(append([]byte(nil), l.prefix...), l.partial[:i+1]...)
		l.partial = l.partial[i+1:]
		if _, err := l.w.Write(line); err != nil {
			return len(p), err
		}
	}
}
