package environment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optrefresh"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Op is an operation that changes the stack, as Recover runs it again.
type Op string

const (
	OpUp      Op = "up"
	OpDestroy Op = "destroy"
)

// opMarker is the file in the work directory that names the operation under way; it outlives a killed engine, so
// Recover knows what to run again.
const opMarker = "operation"

// begin clears the record of the last up and records op as under way until the returned function runs: an up's when
// its engine returns, whatever the result; a destroy's once it succeeded (Stack.destroy).
func (s *Stack) begin(op Op) (func(), error) {
	// What the stack holds is about to change: no record of an earlier up may let it be skipped.
	if err := os.Remove(filepath.Join(s.opts.WorkDir, appliedRecord)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("engine: %w", err)
	}
	path := filepath.Join(s.opts.WorkDir, opMarker)
	if err := os.WriteFile(path, []byte(op), 0o600); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return func() { _ = os.Remove(path) }, nil
}

// environmentOpMarker, in the platform stack's work directory, names an operation of the whole environment under way
// (a destroy): recover runs it again on every stack.
const environmentOpMarker = "environment-operation"

// begin records an operation of the whole environment; the function it returns clears the record, once it is done.
func (e *Environment) begin(op Op) (func(), error) {
	path := filepath.Join(e.Stacks[0].opts.WorkDir, environmentOpMarker)
	if err := os.WriteFile(path, []byte(op), 0o600); err != nil {
		return nil, fmt.Errorf("environment: %w", err)
	}
	return e.finished, nil
}

// finished clears the record of an operation of the whole environment.
func (e *Environment) finished() {
	_ = os.Remove(filepath.Join(e.Stacks[0].opts.WorkDir, environmentOpMarker))
}

// interrupted is the operation of the whole environment a killed run left unfinished, or "" when none.
func (e *Environment) interrupted() Op {
	raw, err := os.ReadFile(filepath.Join(e.Stacks[0].opts.WorkDir, environmentOpMarker))
	if err != nil {
		return ""
	}
	return Op(strings.TrimSpace(string(raw)))
}

// Interrupted is the operation a killed engine left unfinished on this stack, or "" when none.
func (s *Stack) Interrupted() Op {
	raw, err := os.ReadFile(filepath.Join(s.opts.WorkDir, opMarker))
	if err != nil {
		return ""
	}
	return Op(strings.TrimSpace(string(raw)))
}

// Recover converges a stack after the engine was killed during an operation, then runs the operation again:
//
//  1. a lock left by a pulumi process of this host that no longer runs is released, with a message; a lock of a
//     process that still runs, or of another host, is an error that says whose it is;
//  2. a refresh reads what actually exists and drops pending creates, whose objects the next `up` adopts: every
//     Kubernetes object is server-side applied, and a create of an object that exists applies over it;
//  3. a Helm release an interrupted install, upgrade or rollback left pending (its storage Secret has status
//     pending-*) loses that record, so the next install or upgrade of the same name proceeds; the objects it had
//     created carry the release's ownership annotations, which Helm adopts;
//  4. the operation runs again: op, else the one that was interrupted, else `up`.
func (s *Stack) Recover(ctx context.Context, op Op) error {
	if op == "" {
		op = s.Interrupted()
	}
	if op == "" {
		op = OpUp
	}
	if op != OpUp && op != OpDestroy {
		return fmt.Errorf("engine: recover: unknown operation %q: up or destroy", op)
	}
	s.say("recover: stack %s, then %s", s.opts.Stack, op)
	if err := s.ReleaseStaleLocks(); err != nil {
		return fmt.Errorf("engine: recover: %w", err)
	}
	pending, err := s.pendingCreates(ctx)
	if err != nil {
		return err
	}
	for _, urn := range pending {
		s.say("recover: dropping the pending create of %s; the next up adopts the object if it was created", urn)
	}
	if _, err := s.Refresh(ctx, optrefresh.ClearPendingCreates(), optrefresh.ProgressStreams(s.progress()),
		optrefresh.ErrorProgressStreams(s.progress())); err != nil {
		return fmt.Errorf("engine: recover: refresh: %w", err)
	}
	if err := s.clearPendingHelmReleases(ctx); err != nil {
		return err
	}
	switch op {
	case OpDestroy:
		_, err = s.Destroy(ctx)
	default:
		_, err = s.Up(ctx)
	}
	if err != nil {
		return fmt.Errorf("engine: recover: %s: %w", op, err)
	}
	s.say("recover: stack %s converged", s.opts.Stack)
	return nil
}

func (s *Stack) say(format string, args ...any) {
	fmt.Fprintf(s.progress(), format+"\n", args...)
}

// pendingCreates are the resources the state says were being created when the engine stopped.
func (s *Stack) pendingCreates(ctx context.Context) ([]string, error) {
	state, err := s.Export(ctx)
	if err != nil {
		return nil, fmt.Errorf("engine: recover: reading the state: %w", err)
	}
	var deployment struct {
		PendingOperations []struct {
			Type     string `json:"type"`
			Resource struct {
				URN string `json:"urn"`
			} `json:"resource"`
		} `json:"pending_operations"`
	}
	if len(state.Deployment) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(state.Deployment, &deployment); err != nil {
		return nil, fmt.Errorf("engine: recover: decoding the state: %w", err)
	}
	var urns []string
	for _, op := range deployment.PendingOperations {
		if op.Type == "creating" {
			urns = append(urns, op.Resource.URN)
		}
	}
	return urns, nil
}

// Helm's release storage (helm.sh/helm/v3 pkg/storage/driver/secrets.go and pkg/release/status.go, v3.18): one
// Secret per revision, labelled owner=helm, name=<release>, status=<status>.
var pendingHelmStatuses = []string{"pending-install", "pending-upgrade", "pending-rollback"}

// clearPendingHelmReleases deletes the storage record of every Helm release revision left pending in the namespaces
// this stack owns. The cluster is the one the stack's kubeconfig output names; a stack that has none yet has nothing
// on a cluster.
func (s *Stack) clearPendingHelmReleases(ctx context.Context) error {
	client := s.clusterClient(ctx)
	if client == nil {
		return nil
	}
	owner := naming.StackOwner(projectName, s.opts.Stack)
	namespaces, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: naming.StackLabel + "=" + owner})
	if err != nil {
		return fmt.Errorf("engine: recover: listing the stack's namespaces: %w", err)
	}
	for _, ns := range namespaces.Items {
		secrets, err := client.CoreV1().Secrets(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
		if err != nil {
			return fmt.Errorf("engine: recover: listing Helm releases in %s: %w", ns.Name, err)
		}
		for _, sec := range secrets.Items {
			status := sec.Labels["status"]
			if !slices.Contains(pendingHelmStatuses, status) {
				continue
			}
			err := client.CoreV1().Secrets(ns.Name).Delete(ctx, sec.Name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("engine: recover: deleting Helm record %s/%s: %w", ns.Name, sec.Name, err)
			}
			s.say("recover: Helm release %s/%s revision %s was left %s: its record is removed so the release can be installed or upgraded again",
				ns.Name, sec.Labels["name"], sec.Labels["version"], status)
		}
	}
	return nil
}
