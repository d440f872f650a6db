// Package cli is the `gpu-tenancy` command line: flags, commands, output and exit codes around the reports of
// package gpureport. docs/cli.md documents it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/gpu-tenancy/gpu-tenancy/components/monitoring/rules"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport/kube"
)

// Exit codes: scripts tell a finding from a broken invocation from an unreachable cluster.
const (
	ExitOK = 0
	// ExitFindings: audit found a broken invariant, or pending found a claim older than --older-than.
	ExitFindings = 1
	// ExitUsage: bad flags or no usable kubeconfig.
	ExitUsage = 2
	// ExitCluster: the cluster could not be reached or refused a read.
	ExitCluster = 3
)

const usage = `gpu-tenancy: the GPU platform's operators' tool.

Usage:
  gpu-tenancy capacity [flags]   devices per GPU class (exist, allocated, free), per tenant (allocated, requested, quota,
                                 hourly cost with --prices), per pool
  gpu-tenancy pending  [flags]   unallocated device claims with tenant, classes, age and reason
  gpu-tenancy audit    [flags]   the platform's invariants on the live cluster; exits 1 on any finding

Flags:
  --kubeconfig FILE          kubeconfig to use
  --stack NAME               use the kubeconfig output of this Pulumi stack (pulumi CLI on PATH)
                             without either: $KUBECONFIG, else ~/.kube/config
  -o, --output FORMAT        table (default), json or yaml
  --request-timeout DURATION bound on each API request (default 30s)
  --older-than DURATION      pending only: exit 1 when a claim has waited longer
  --prices FILE              capacity only: price the allocated devices, from a stack file's gpu-tenancy:prices
                             (stacks/Pulumi.<stack>.yaml) or a file holding that block alone

Exit codes: 0 fine, 1 findings, 2 usage or kubeconfig error, 3 cluster unreachable or read refused.
`

// App runs the command line.
type App struct {
	Stdout, Stderr io.Writer
	// Connect makes the client for a resolved kubeconfig; tests substitute a fake clientset.
	Connect func(*kube.Target) (kubernetes.Interface, error)
	// Now stamps the reports and ages the claims.
	Now func() time.Time
}

// New returns an App that talks to real clusters.
func New(stdout, stderr io.Writer) *App {
	return &App{
		Stdout: stdout, Stderr: stderr, Now: time.Now,
		Connect: func(t *kube.Target) (kubernetes.Interface, error) { return kubernetes.NewForConfig(t.Config) },
	}
}

type options struct {
	source    kube.Source
	format    gpureport.Format
	olderThan time.Duration
	prices    rules.Prices
}

// Run runs one command and returns the process's exit code.
func (a *App) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.Stderr, usage)
		return ExitUsage
	}
	cmd := args[0]
	switch cmd {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(a.Stdout, usage)
		return ExitOK
	case "capacity", "pending", "audit":
	default:
		a.errorf("unknown command %q; run `gpu-tenancy help`", cmd)
		return ExitUsage
	}
	opts, err := parseFlags(cmd, args[1:], a.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		a.errorf("%v", err)
		return ExitUsage
	}

	target, err := kube.Resolve(ctx, opts.source)
	if err != nil {
		a.errorf("%v", err)
		return ExitUsage
	}
	client, err := a.Connect(target)
	if err != nil {
		a.errorf("cannot use %s: %v", target.From, err)
		return ExitUsage
	}
	need := map[string]gpureport.Need{
		"capacity": gpureport.CapacityNeeds, "pending": gpureport.PendingNeeds, "audit": gpureport.AuditNeeds,
	}[cmd]
	loader := &kube.Loader{Client: client, Progress: kube.NewProgress(a.Stderr)}
	snap, err := loader.Load(ctx, need)
	if err != nil {
		a.errorf("cannot read the cluster at %s (%s): %v", target.Server(), target.From, err)
		return ExitCluster
	}

	now := a.Now()
	code := ExitOK
	var rep gpureport.Report
	switch cmd {
	case "capacity":
		c := gpureport.Capacity(ctx, snap, now)
		c.Price(opts.prices)
		rep = c
	case "pending":
		p := gpureport.Pending(ctx, snap, now)
		if opts.olderThan > 0 {
			if n := p.MarkOverdue(opts.olderThan); n > 0 {
				oldest := p.Claims[0]
				a.errorf("%d pending claim(s) waited longer than %s; the oldest, %s, for %s",
					n, opts.olderThan, describe(&oldest), time.Duration(oldest.AgeSeconds)*time.Second)
				code = ExitFindings
			}
		}
		rep = p
	case "audit":
		au := gpureport.Audit(snap, now)
		if n := len(au.Findings); n > 0 {
			a.errorf("audit: %d finding(s)", n)
			code = ExitFindings
		}
		rep = au
	}
	if err := gpureport.Write(a.Stdout, rep, opts.format); err != nil {
		a.errorf("writing the report: %v", err)
		return ExitUsage
	}
	return code
}

func parseFlags(cmd string, args []string, stdout io.Writer) (*options, error) {
	fs := flag.NewFlagSet("gpu-tenancy "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	opts := &options{}
	var output string
	fs.StringVar(&opts.source.Kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&opts.source.Stack, "stack", "", "")
	fs.StringVar(&output, "o", string(gpureport.Table), "")
	fs.StringVar(&output, "output", string(gpureport.Table), "")
	fs.DurationVar(&opts.source.Timeout, "request-timeout", 30*time.Second, "")
	var pricesFile string
	switch cmd {
	case "pending":
		fs.DurationVar(&opts.olderThan, "older-than", 0, "")
	case "capacity":
		fs.StringVar(&pricesFile, "prices", "", "")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s takes no arguments, got %q", cmd, strings.Join(fs.Args(), " "))
	}
	f, err := gpureport.ParseFormat(output)
	if err != nil {
		return nil, err
	}
	opts.format = f
	if opts.olderThan < 0 {
		return nil, fmt.Errorf("--older-than %s is negative", opts.olderThan)
	}
	if pricesFile != "" {
		if opts.prices, err = loadPrices(pricesFile); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

func describe(c *gpureport.PendingClaim) string {
	if c.Claim != "" {
		return c.Namespace + "/" + c.Claim
	}
	return fmt.Sprintf("%s/%s (claim from template %s)", c.Namespace, strings.Join(c.Pods, ","), c.Template)
}

// errorf writes one line to stderr: multi-line errors (some API errors are) are folded.
func (a *App) errorf(format string, args ...any) {
	fmt.Fprintln(a.Stderr, "gpu-tenancy: "+strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " "))
}
