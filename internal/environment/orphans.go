package environment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// A group stack runs without checkpoints (Options.GroupCheckpoints): its state is written once, when an operation
// ends. An engine killed half-way therefore leaves objects that no state records. The next up applies the ones its
// config still declares over what exists (every object is server-side applied, with force: components/cluster
// owner.go), so they are recorded again; sweepUnrecorded removes the others, which a tenant taken out of the config
// in between would otherwise leave behind, still carrying the group's owner label.

// clusterObject is an object of the cluster as the sweep sees it: its metadata only.
type clusterObject struct {
	Group, Kind, Namespace, Name string
	Created                      time.Time
	// Dependent objects have owner references: a controller made them (an EndpointSlice copies its Service's labels),
	// and they go with their owner.
	Dependent   bool
	Terminating bool
	resource    schema.GroupVersionResource
}

// key is the object as a state records it: the API group (empty for the core group) and the kind from the
// resource's type token, and its ID, `namespace/name` or `name`. The version is left out, since the same object may
// be recorded under another one.
func (o clusterObject) key() string {
	id := o.Name
	if o.Namespace != "" {
		id = o.Namespace + "/" + o.Name
	}
	return o.Group + "/" + o.Kind + "/" + id
}

func (o clusterObject) String() string {
	if o.Namespace != "" {
		return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name)
	}
	return o.Kind + " " + o.Name
}

// recordedKeys are the clusterObject keys of the Kubernetes objects a state holds. A type token is
// kubernetes:<group>/<version>:<Kind>, core/v1 for the core group (pulumi-kubernetes v4.32.0 provider/pkg/kinds).
func recordedKeys(resources []stateResource) map[string]bool {
	keys := map[string]bool{}
	for _, r := range resources {
		rest, ok := strings.CutPrefix(r.Type, "kubernetes:")
		if !ok || !r.Custom || r.ID == "" {
			continue
		}
		gv, kind, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		group, _, _ := strings.Cut(gv, "/")
		if group == "core" {
			group = ""
		}
		keys[group+"/"+kind+"/"+r.ID] = true
	}
	return keys
}

// unrecorded sorts the objects carrying a stack's owner label that no state records (recorded says which do) into
// those an interrupted run of the stack created, created after since (the end of the stack's last recorded
// operation), to remove; and the others, to leave in place and name. Neither holds dependent or terminating objects.
// A creation time has whole seconds and since milliseconds, so an object of the same second as since is left in
// place: an error can only keep an object, never remove one that was recorded.
func unrecorded(objects []clusterObject, recorded func(key string) bool, since time.Time) (remove, keep []clusterObject) {
	for _, o := range objects {
		if o.Dependent || o.Terminating || recorded(o.key()) {
			continue
		}
		if o.Created.After(since) {
			remove = append(remove, o)
		} else {
			keep = append(keep, o)
		}
	}
	return remove, keep
}

// labelledObjects lists the namespaces and cluster-scoped objects that carry owner as naming.StackLabel, of every
// resource type the API server serves that can be listed and deleted. Objects inside a namespace are left to it:
// removing a namespace removes them, and a namespace that stays is a tenant's, whose objects a controller may have
// labelled after a Service (Endpoints copy its labels and name no owner).
func labelledObjects(ctx context.Context, cfg *rest.Config, owner string) ([]clusterObject, error) {
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lists, err := disco.ServerPreferredResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovering the API server's resources: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var objects []clusterObject
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			namespace := gv.Group == "" && r.Kind == "Namespace"
			if (r.Namespaced && !namespace) || strings.Contains(r.Name, "/") ||
				!slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") {
				continue
			}
			items, err := meta.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: naming.StackLabel + "=" + owner})
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				// The stack's credentials, which cannot list this type, could not have created one of it either.
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s labelled %s=%s: %w", r.Name, naming.StackLabel, owner, err)
			}
			for _, item := range items.Items {
				objects = append(objects, clusterObject{Group: gv.Group, Kind: r.Kind, Name: item.Name,
					Created: item.CreationTimestamp.Time, Dependent: len(item.OwnerReferences) > 0,
					Terminating: item.DeletionTimestamp != nil, resource: gv.WithResource(r.Name)})
			}
		}
	}
	return objects, nil
}

// sweepUnrecorded removes from the cluster of cfg the namespaces and cluster-scoped objects of group stack s that an
// interrupted run created and no stack of the environment records (unrecorded), after an operation of s that
// succeeded; since is the end of s's last operation before it. The objects s's own state records are read first;
// the other stacks' states only when something is left, so that an object handed to another stack by a move that
// did not finish (recorded there, still labelled as s's) stays. The rest is named and left in place.
func (e *Environment) sweepUnrecorded(ctx context.Context, s *Stack, cfg *rest.Config, since time.Time) error {
	owner := naming.StackOwner(projectName, s.opts.Stack)
	objects, err := labelledObjects(ctx, cfg, owner)
	if err != nil || len(objects) == 0 {
		return err
	}
	recorded := map[string]bool{}
	read := func(st *Stack) error {
		res, err := st.resources(ctx)
		for k := range recordedKeys(res) {
			recorded[k] = true
		}
		return err
	}
	if err := read(s); err != nil {
		return err
	}
	isRecorded := func(k string) bool { return recorded[k] }
	remove, keep := unrecorded(objects, isRecorded, since)
	if len(remove)+len(keep) > 0 {
		for _, other := range e.Stacks {
			if other != s {
				if err := read(other); err != nil {
					return err
				}
			}
		}
		remove, keep = unrecorded(objects, isRecorded, since)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	background := metav1.DeletePropagationBackground
	for _, o := range remove {
		err := meta.Resource(o.resource).Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("stack %s: removing %s, which an interrupted run created and no state records: %w", s.opts.Stack, o, err)
		}
		s.say("%s: removed %s: an interrupted run created it (%s, after the stack's last record at %s), the config no "+
			"longer declares it, and no stack of the environment records it", s.opts.Stack, o,
			o.Created.UTC().Format(time.RFC3339), since.UTC().Format(time.RFC3339))
	}
	for _, o := range keep {
		s.say("%s: %s carries the stack's owner label (%s=%s) but no state of the environment records it; it predates "+
			"the stack's last record, so it was not created by an interrupted run and is left in place: delete it, or "+
			"adopt it (gpu-tenancy:ownership), if it is not wanted", s.opts.Stack, o, naming.StackLabel, owner)
	}
	return nil
}

// sweeper returns what runs after an operation of a group stack succeeded: for a stack without checkpoints,
// sweepUnrecorded, with the time its state was last written as it is now, before the group stacks run. Call it
// before they do, once the platform stack's cluster is up.
func (e *Environment) sweeper(ctx context.Context) (func(*Stack) error, error) {
	none := func(*Stack) error { return nil }
	cfg := e.Stacks[0].clusterConfig(ctx)
	if cfg == nil || !slices.ContainsFunc(e.groupStacks(), func(s *Stack) bool { return s.opts.skipCheckpoints }) {
		// No cluster yet, so no group has objects on it; or every group keeps its checkpoints.
		return none, nil
	}
	p := e.Stacks[0]
	listed, err := listStacks(ctx, p.cli, p.opts.WorkDir, p.cliEnv(), e.opts)
	if err != nil {
		return nil, err
	}
	since := lastWritten(listed, time.Now())
	return func(s *Stack) error {
		if !s.opts.skipCheckpoints {
			return nil
		}
		return e.sweepUnrecorded(ctx, s, cfg, since[s.opts.Stack])
	}, nil
}

// lastWritten is when each listed stack's state was last written, absent for a stack never written (nothing it
// created is recorded anywhere). Where the time is unknown (an update the backend still counts as running, as a
// killed one on Pulumi Cloud until it is cancelled; an unreadable time) it is now, so that nothing is removed, only
// named.
func lastWritten(listed []backendStack, now time.Time) map[string]time.Time {
	since := map[string]time.Time{}
	for _, b := range listed {
		if b.UpdateInProgress != nil && *b.UpdateInProgress {
			since[b.Name] = now
			continue
		}
		if b.LastUpdate == "" {
			continue
		}
		t, err := time.Parse(lastUpdateLayout, b.LastUpdate)
		if err != nil {
			t = now
		}
		since[b.Name] = t
	}
	return since
}

// lastUpdateLayout is how `pulumi stack ls --json` writes a time (pulumi pkg v3.274.1 cmd/pulumi/cmd/time.go).
const lastUpdateLayout = "2006-01-02T15:04:05.000Z07:00"
