package environment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// A group stack runs without checkpoints (Options.GroupCheckpoints): its state is written once, when an operation
// ends. An engine killed half-way therefore leaves objects that no state records. The next up applies the ones its
// config still declares over what exists (every object is server-side applied, with force: components/cluster
// owner.go), so they are recorded again; sweepUnrecorded removes the others, which a tenant taken out of the config
// in between would otherwise leave behind, still carrying the group's owner label.

// clusterObject is a namespace or cluster-scoped object as the sweep sees it: its metadata only.
type clusterObject struct {
	Group, Kind, Name string
	Created           time.Time
	// Dependent objects have owner references: a controller made them (an EndpointSlice copies its Service's labels),
	// and they go with their owner.
	Dependent   bool
	Terminating bool

	resource        schema.GroupVersionResource
	uid             types.UID
	resourceVersion string
}

// key is the object as a state records it: the API group (empty for the core group) and the kind from the
// resource's type token, and its ID, which is the name of a cluster-scoped object. The version is left out, since the
// same object may be recorded under another one.
func (o clusterObject) key() string { return o.Group + "/" + o.Kind + "/" + o.Name }

func (o clusterObject) String() string { return o.Kind + " " + o.Name }

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
// place: an error can only keep an object, never remove one that was recorded. The namespace of a tenant the config
// lists (tenantNamespaces) is always left in place.
func unrecorded(objects []clusterObject, recorded func(key string) bool, since time.Time, tenantNamespaces map[string]bool) (remove, keep []clusterObject) {
	for _, o := range objects {
		if o.Dependent || o.Terminating || recorded(o.key()) {
			continue
		}
		if o.Created.After(since) && !(o.Group == "" && o.Kind == naming.KindNamespace && tenantNamespaces[o.Name]) {
			remove = append(remove, o)
		} else {
			keep = append(keep, o)
		}
	}
	return remove, keep
}

// sweptKinds are the kinds a sweep lists, with their resources: the cluster-scoped kinds the program creates, those
// its ownership check guards (the namespace among them, platform.OwnedKinds) and the vCluster chart's ClusterRole and
// binding. Objects inside a namespace are left to it: removing a namespace removes them, and a namespace that stays
// is a tenant's, whose objects a controller may have labelled after a Service (Endpoints copy its labels and name no
// owner). No other kind is listed: an API that serves the same objects under another group (OpenShift's Projects are
// Namespaces) would make them look unrecorded, and a labelled PersistentVolume may hold a disk.
func sweptKinds() map[string]schema.GroupVersionResource {
	kinds := platform.OwnedKinds()
	kinds["ClusterRole"] = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	kinds["ClusterRoleBinding"] = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"}
	return kinds
}

// labelledObjects lists the objects of sweptKinds that carry owner as naming.StackLabel.
func labelledObjects(ctx context.Context, meta metadata.Interface, owner string) ([]clusterObject, error) {
	var objects []clusterObject
	for kind, resource := range sweptKinds() {
		items, err := meta.Resource(resource).List(ctx, metav1.ListOptions{LabelSelector: naming.StackLabel + "=" + owner})
		if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
			// Not served, or not listable with the stack's credentials, which then could not have created one either.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s labelled %s=%s: %w", resource.Resource, naming.StackLabel, owner, err)
		}
		for _, item := range items.Items {
			objects = append(objects, clusterObject{Group: resource.Group, Kind: kind, Name: item.Name,
				Created: item.CreationTimestamp.Time, Dependent: len(item.OwnerReferences) > 0,
				Terminating: item.DeletionTimestamp != nil, resource: resource, uid: item.UID,
				resourceVersion: item.ResourceVersion})
		}
	}
	return objects, nil
}

// sweepUnrecorded removes from the cluster of cfg the namespaces and cluster-scoped objects of group stack s that an
// interrupted run created and no stack of the environment records (unrecorded), after an operation of s that
// succeeded; since is the end of s's last operation before it. The objects s's own state records are read first;
// every other stack's state of the environment only when something is left, so that an object handed to another
// stack by a move that did not finish (recorded there, still labelled as s's) stays. The namespace of a tenant the
// config lists is never removed, and an object is deleted only as it was listed (its UID and resource version), so
// that one taken over in between stays. The rest is named and left in place.
func (e *Environment) sweepUnrecorded(ctx context.Context, s *Stack, cfg *rest.Config, since time.Time) error {
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	owner := naming.StackOwner(projectName, s.opts.Stack)
	objects, err := labelledObjects(ctx, meta, owner)
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
	tenantNamespaces := map[string]bool{}
	for _, t := range e.Stacks[0].args.TenantNames() {
		tenantNamespaces[naming.Namespace(t)] = true
	}
	isRecorded := func(k string) bool { return recorded[k] }
	remove, keep := unrecorded(objects, isRecorded, since, tenantNamespaces)
	if len(remove)+len(keep) > 0 {
		for _, other := range e.all {
			if other != s {
				if err := read(other); err != nil {
					return err
				}
			}
		}
		remove, keep = unrecorded(objects, isRecorded, since, tenantNamespaces)
	}
	background := metav1.DeletePropagationBackground
	for _, o := range remove {
		err := meta.Resource(o.resource).Delete(ctx, o.Name, metav1.DeleteOptions{PropagationPolicy: &background,
			Preconditions: &metav1.Preconditions{UID: &o.uid, ResourceVersion: &o.resourceVersion}})
		if apierrors.IsConflict(err) {
			s.say("%s: %s changed after it was listed as unrecorded: left in place", s.opts.Stack, o)
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("stack %s: removing %s, which an interrupted run created and no state records: %w", s.opts.Stack, o, err)
		}
		s.say("%s: removed %s: created at %s, after the stack's last record at %s (the work of an interrupted run), "+
			"and no stack of the environment records it", s.opts.Stack, o, o.Created.UTC().Format(time.RFC3339),
			since.UTC().Format(time.RFC3339Nano))
	}
	for _, o := range keep {
		s.say("%s: %s carries the stack's owner label (%s=%s) but no state of the environment records it. It is left in "+
			"place: it was created before the stack's last record at %s, or is the namespace of a tenant the stack file "+
			"lists, so the runner cannot tell it is an interrupted run's work. A tenant's namespace is moved with "+
			"gpu-tenancy move; anything else, delete it or adopt it (gpu-tenancy:ownership) if it is not wanted",
			s.opts.Stack, o, naming.StackLabel, owner, since.UTC().Format(time.RFC3339Nano))
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

// lastWritten is when each listed stack's state was last written, absent for a stack never written and empty
// (nothing it created is recorded anywhere). Where the time is unknown (an update the backend still counts as running, as a
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
			if b.ResourceCount != nil && *b.ResourceCount > 0 {
				// Resources without a time: a state imported or moved in without one.
				since[b.Name] = now
			}
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
