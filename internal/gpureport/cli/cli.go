// Package cli is the `gpu-tenancy` command line: flags, commands, output and exit codes around the reports of
// package gpureport. docs/cli.md documents it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
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

// PluginName is the file name under which kubectl runs the binary as `kubectl gpu-tenancy`: a plugin's file is
// kubectl-<command>, with the command's dashes written as underscores
// (https://kubernetes.io/docs/tasks/extend-kubectl/kubectl-plugins/).
const PluginName = "kubectl-gpu_tenancy"

// environmentExitCodes ends the help of the environment's commands.
const environmentExitCodes = `
Exit codes: 0 done, 1 the operation failed (its error says where it stopped and what to run), 2 usage error.
`

// exitCodes ends every help text, so that a script's author finds them where the flags are.
const exitCodes = `
Exit codes: 0 fine, 1 findings, 2 usage or kubeconfig error, 3 cluster unreachable or read refused.
`

// App runs the command line.
type App struct {
	Stdout, Stderr io.Writer
	// Name is the name the binary was run by (the base of os.Args[0]); as PluginName, help says `kubectl gpu-tenancy`.
	Name string
	// Connect makes the client for a resolved kubeconfig; tests substitute a fake clientset.
	Connect func(*kube.Target) (kubernetes.Interface, error)
	// Now stamps the reports and ages the claims.
	Now func() time.Time
	// Commands are the binary's further commands, in a help group of their own (envcmd.GroupID): the environment's. An
	// error of theirs that says its exit code (an ExitCode method) ends the run with it.
	Commands []*cobra.Command
}

// New returns an App that talks to real clusters.
func New(stdout, stderr io.Writer) *App {
	return &App{
		Stdout: stdout, Stderr: stderr, Name: "gpu-tenancy", Now: time.Now,
		Connect: func(t *kube.Target) (kubernetes.Interface, error) { return kubernetes.NewForConfig(t.Config) },
	}
}

// exitError ends a run with code after saying err on stderr; a command's other errors are usage errors.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return fmt.Sprintf("exit %d: %v", e.code, e.err) }

// options are the flags of one run.
type options struct {
	source     kube.Source
	output     string
	format     gpureport.Format
	namespace  string
	olderThan  time.Duration
	pricesFile string
}

// Run runs one command and returns the process's exit code.
func (a *App) Run(ctx context.Context, args []string) int {
	root := a.command()
	// Non-nil even when empty: given nil, cobra would read os.Args instead.
	root.SetArgs(append([]string{}, args...))
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	if len(args) == 0 {
		// A bare invocation is a mistake, not a request for help: the help goes to stderr and the exit code is 2.
		root.SetOut(a.Stderr)
	}
	err := root.ExecuteContext(ctx)
	var exit *exitError
	var coded interface{ ExitCode() int }
	switch {
	case len(args) == 0:
		return ExitUsage
	case err == nil:
		return ExitOK
	case errors.As(err, &exit):
		a.errorf("%v", exit.err)
		return exit.code
	case errors.As(err, &coded):
		a.errorf("%v", err)
		return coded.ExitCode()
	default:
		a.errorf("%v", err)
		return ExitUsage
	}
}

// displayName is the command as the user typed it: `kubectl gpu-tenancy` when kubectl runs the binary as its plugin.
func (a *App) displayName() string {
	if a.Name == PluginName {
		return "kubectl gpu-tenancy"
	}
	return "gpu-tenancy"
}

// examples writes each example line under the name the binary was run by.
func (a *App) examples(lines ...string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "  " + a.displayName() + " " + l
	}
	return strings.Join(out, "\n")
}

// command builds the command tree; the help text of each command is generated from its flags.
func (a *App) command() *cobra.Command {
	o := &options{source: kube.Source{Flags: kube.NewFlags()}}
	root := &cobra.Command{
		Use:   "gpu-tenancy",
		Short: "The GPU platform's operators' tool",
		Long: `The GPU platform's operators' tool: capacity, pending claims and an audit of the live cluster, read from the
host cluster's API server and printed as a table, or as versioned JSON or YAML documents (docs/cli.md); and, in the
full binary, an environment's stacks driven with the Pulumi engine: stacks, preview, up, refresh, destroy, recover,
move (docs/operating.md).

Which cluster: --stack NAME, else kubectl's rules: --kubeconfig, else $KUBECONFIG, else ~/.kube/config; --context,
else the kubeconfig's current context; inside a pod without a kubeconfig, the pod's service account.`,
		Example: a.examples(
			"capacity --stack gke-dev",
			"pending --older-than 30m -o json",
			"audit --context prod",
		),
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: a.displayName()},
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return o.validate()
		},
	}
	root.SetUsageTemplate(root.UsageTemplate() + exitCodes)
	root.SetFlagErrorFunc(flagError)

	global := root.PersistentFlags()
	o.source.Flags.AddFlags(global)
	global.StringVar(&o.source.Stack, "stack", "",
		"Use the kubeconfig output of this Pulumi stack (pulumi CLI on PATH, run in the current directory); excludes --kubeconfig and --context")
	global.StringVarP(&o.output, "output", "o", string(gpureport.Table), "Output format: table, json or yaml")
	cobra.CheckErr(root.MarkPersistentFlagFilename("kubeconfig"))
	cobra.CheckErr(root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(
		[]string{string(gpureport.Table), string(gpureport.JSON), string(gpureport.YAML)}, cobra.ShellCompDirectiveNoFileComp)))
	cobra.CheckErr(root.RegisterFlagCompletionFunc("context", o.contexts))

	root.AddGroup(&cobra.Group{ID: reportsGroup, Title: "Cluster reports (read the live cluster):"})
	for _, cmd := range []*cobra.Command{a.capacity(o), a.pending(o), a.audit(o)} {
		cmd.GroupID = reportsGroup
		root.AddCommand(cmd)
	}
	if len(a.Commands) > 0 {
		root.AddGroup(&cobra.Group{ID: a.Commands[0].GroupID, Title: "Environments (drive an environment's stacks with the Pulumi engine):"})
		// The reports' flags, persistent on the root so that they may stand before the command as kubectl takes them, mean
		// nothing to these commands: their help leaves them out, and one set is refused, naming it.
		usage := inheritedFlags.ReplaceAllString(strings.TrimSuffix(root.UsageTemplate(), exitCodes), "") + environmentExitCodes
		for _, cmd := range a.Commands {
			cmd.SetUsageTemplate(usage)
			cmd.PersistentPreRunE = refuseReportFlags
			root.AddCommand(cmd)
		}
	}
	return root
}

// reportsGroup is the help's group of the cluster reports.
const reportsGroup = "reports"

// inheritedFlags is the part of cobra's usage template that lists a command's inherited flags.
var inheritedFlags = regexp.MustCompile(`(?s)\{\{if \.HasAvailableInheritedFlags\}\}.*?\{\{end\}\}`)

// refuseReportFlags refuses, for a command other than the reports, a report flag that was set.
func refuseReportFlags(cmd *cobra.Command, _ []string) error {
	var set []string
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			set = append(set, "--"+f.Name)
		}
	})
	if len(set) > 0 {
		return fmt.Errorf("%s: %s is a flag of the cluster reports (capacity, pending, audit), not of %s", cmd.CommandPath(),
			strings.Join(set, ", "), cmd.Name())
	}
	return nil
}

func (a *App) capacity(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Devices per GPU class (exist, allocated, free), per tenant (allocated, requested, quota, hourly cost with --prices), per pool",
		Long: `Devices per GPU class of the catalog (exist, allocated, unavailable, free) and per pool; per tenant and class
what the tenant holds, requests and may request, and with --prices what that costs per hour.

--namespace narrows the tenant rows (and their costs) to one namespace. The class and pool figures stay
cluster-wide: the claims of every namespace draw on the same devices, so a device held elsewhere is not free here
either.`,
		Example: a.examples("capacity --stack gke-dev --prices stacks/Pulumi.gke-dev.yaml"),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var prices rules.Prices
			if o.pricesFile != "" {
				var err error
				if prices, err = loadPrices(o.pricesFile); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			return a.report(ctx, o, gpureport.CapacityNeeds, "", func(s *gpureport.Snapshot, now time.Time) (gpureport.Report, error) {
				c := gpureport.Capacity(ctx, s, now)
				c.NarrowToNamespace(o.namespace)
				c.Price(prices)
				return c, nil
			})
		},
	}
	namespaceFlag(cmd, &o.namespace, "Only the tenant rows of this namespace; the class and pool figures stay cluster-wide")
	cmd.Flags().StringVar(&o.pricesFile, "prices", "",
		"Price the allocated devices, from a stack file's gpu-tenancy:prices (stacks/Pulumi.<stack>.yaml) or a file holding that block alone")
	cobra.CheckErr(cmd.MarkFlagFilename("prices", "yaml", "yml", "json"))
	return cmd
}

func (a *App) pending(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "Unallocated device claims with tenant, classes, age and reason",
		Long: `Every device claim that is not allocated (and every pod whose claim could not be created), oldest first, with
its tenant, classes, age and the reasons it waits.

With --older-than the run exits 1 when a claim has waited longer, for cron jobs and CI. --namespace lists the claims,
pods, claim templates and events of that namespace only.`,
		Example: a.examples("pending --stack prod --older-than 30m -o json > pending.json || alert \"claims wait for GPUs\""),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.olderThan < 0 {
				return fmt.Errorf("--older-than %s is negative", o.olderThan)
			}
			ctx := cmd.Context()
			return a.report(ctx, o, gpureport.PendingNeeds, o.namespace, func(s *gpureport.Snapshot, now time.Time) (gpureport.Report, error) {
				p := gpureport.Pending(ctx, s, now)
				if o.olderThan == 0 {
					return p, nil
				}
				n := p.MarkOverdue(o.olderThan)
				if n == 0 {
					return p, nil
				}
				oldest := p.Claims[0]
				return p, &exitError{ExitFindings, fmt.Errorf("%d pending claim(s) waited longer than %s; the oldest, %s, for %s",
					n, o.olderThan, describe(&oldest), time.Duration(oldest.AgeSeconds)*time.Second)}
			})
		},
	}
	namespaceFlag(cmd, &o.namespace, "Only the claims and pods of this namespace")
	cmd.Flags().DurationVar(&o.olderThan, "older-than", 0, "Exit 1 when a claim has waited longer than this (15m, 1h30m)")
	return cmd
}

func (a *App) audit(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "audit",
		Short: "The platform's invariants on the live cluster; exits 1 on any finding",
		Long: `Checks the platform's invariants on the live cluster (quotas, limit ranges, entitlement policies, pod security,
vCluster sync, grants) and names the fix of each finding; exits 1 on any finding.

The audit takes no --namespace: it checks the whole platform, and its invariants span namespaces (a class's grants,
the admission policies and their bindings).`,
		Example: a.examples("audit --context prod -o json"),
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.report(cmd.Context(), o, gpureport.AuditNeeds, "", func(s *gpureport.Snapshot, now time.Time) (gpureport.Report, error) {
				au := gpureport.Audit(s, now)
				if n := len(au.Findings); n > 0 {
					return au, &exitError{ExitFindings, fmt.Errorf("audit: %d finding(s)", n)}
				}
				return au, nil
			})
		},
	}
}

// namespaceFlag adds kubectl's -n/--namespace to a report it narrows. It is an explicit choice only: unlike kubectl
// get, the reports cover every namespace by default, so the namespace of the kubeconfig's context is not used.
func namespaceFlag(cmd *cobra.Command, into *string, usage string) {
	cmd.Flags().StringVarP(into, "namespace", "n", "", usage+" (default: every namespace; the context's namespace is not used)")
}

// flagError points at the command's help or, for a long flag given with one dash as Go's flag package allows
// (`-kubeconfig`), at the missing dash.
func flagError(c *cobra.Command, err error) error {
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) {
		if long := unknown.GetSpecifiedShortnames(); long != "" && c.Flags().Lookup(long) != nil {
			return fmt.Errorf("%w: long flags take two dashes, --%s", err, long)
		}
	}
	return fmt.Errorf("%w; see `%s --help`", err, c.CommandPath())
}

// validate checks the flags every command shares before any cluster is read.
func (o *options) validate() error {
	f, err := gpureport.ParseFormat(o.output)
	if err != nil {
		return fmt.Errorf("-o/--output: %w", err)
	}
	o.format = f
	if o.namespace != "" {
		if msgs := validation.IsDNS1123Label(o.namespace); len(msgs) > 0 {
			return fmt.Errorf("--namespace %q: %s", o.namespace, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// contexts completes --context with the contexts of the kubeconfig the other flags name.
func (o *options) contexts(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	raw, err := o.source.Flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	names := make([]string, 0, len(raw.Contexts))
	for n := range raw.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// noArgs refuses positional arguments: the reports take flags only.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes no arguments, got %q", cmd.Name(), strings.Join(args, " "))
	}
	return nil
}

// report resolves the cluster, loads what need names (namespaced kinds in namespace only, when set), computes the
// report and prints it. compute returns an *exitError for findings: the report is printed all the same.
func (a *App) report(ctx context.Context, o *options, need gpureport.Need, namespace string,
	compute func(*gpureport.Snapshot, time.Time) (gpureport.Report, error)) error {
	target, err := kube.Resolve(ctx, o.source)
	if err != nil {
		return err
	}
	client, err := a.Connect(target)
	if err != nil {
		return fmt.Errorf("cannot use %s: %w", target.From, err)
	}
	loader := &kube.Loader{Client: client, Progress: kube.NewProgress(a.Stderr), Namespace: namespace}
	snap, err := loader.Load(ctx, need)
	if err != nil {
		return &exitError{ExitCluster, fmt.Errorf("cannot read the cluster at %s (%s): %w", target.Server(), target.From, err)}
	}
	rep, findings := compute(snap, a.Now())
	if err := gpureport.Write(a.Stdout, rep, o.format); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return findings
}

func describe(c *gpureport.PendingClaim) string {
	if c.Claim != "" {
		return c.Namespace + "/" + c.Claim
	}
	return fmt.Sprintf("%s/%s (claim from template %s)", c.Namespace, strings.Join(c.Pods, ","), c.Template)
}

// errorf writes one line to stderr: multi-line errors (some API errors, cobra's suggestions) are folded.
func (a *App) errorf(format string, args ...any) {
	fmt.Fprintln(a.Stderr, "gpu-tenancy: "+strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " "))
}
