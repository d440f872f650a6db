package platform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/dra"
	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/metadata"
)

// OwnershipArgs are the ownership key.
type OwnershipArgs struct {
	// Adopt lists objects ("Kind/name", such as "DeviceClass/gpu-whole") this stack may take over although they
	// exist without its owner label: created by hand, by a version before owner labels, or handed over by another
	// stack that no longer manages them.
	Adopt []string `json:"adopt"`
}

// ownedKinds are the kinds whose objects the ownership check guards: each carries its stack's owner label.
var ownedKinds = map[string]schema.GroupVersionResource{
	naming.KindNamespace:     {Version: "v1", Resource: "namespaces"},
	naming.KindDeviceClass:   {Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses"},
	naming.KindPolicy:        {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
	naming.KindPolicyBinding: {Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	naming.KindFlowSchema:    {Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "flowschemas"},
	naming.KindPriorityLevel: {Group: "flowcontrol.apiserver.k8s.io", Version: "v1", Resource: "prioritylevelconfigurations"},
}

// OwnedKinds are the kinds, with their resources, whose objects carry a stack's owner label and the ownership check
// guards (a copy).
func OwnedKinds() map[string]schema.GroupVersionResource { return maps.Clone(ownedKinds) }

// Validate checks each entry names a kind the program creates and an object name.
func (o OwnershipArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	kinds := sortedKeys(ownedKinds)
	for i, ref := range o.Adopt {
		p := path.Child("adopt").Index(i)
		kind, name, ok := strings.Cut(ref, "/")
		switch {
		case !ok || name == "":
			errs = append(errs, field.Invalid(p, ref, "must be Kind/name, such as DeviceClass/gpu-whole"))
		case !slices.Contains(kinds, kind):
			errs = append(errs, field.NotSupported(p, ref, kinds))
		default:
			for _, msg := range validation.IsDNS1123Subdomain(name) {
				errs = append(errs, field.Invalid(p, ref, msg))
			}
		}
	}
	return errs
}

// owner is this stack's naming.StackLabel value; a label value is at most 63 characters.
func owner(project, stack string) (string, error) {
	o := naming.StackOwner(project, stack)
	if msgs := validation.IsValidLabelValue(o); len(msgs) > 0 {
		return "", fmt.Errorf("the stack's owner label %s=%q is no label value (%s): use a shorter stack name",
			naming.StackLabel, o, strings.Join(msgs, "; "))
	}
	return o, nil
}

// plannedObjects are the cluster-scoped objects the program will create for cfg: in an environment split into tenant
// groups, those of its part only, so that no stack of the environment takes over another's.
func plannedObjects(cfg *PlatformArgs) []naming.ObjectRef {
	buildsPlatform, tenants := cfg.builds()
	var names []string
	for _, t := range tenants {
		names = append(names, t.Name)
	}
	refs := tenancy.TenantObjects(names)
	if !buildsPlatform {
		return refs
	}
	refs = append(tenancy.CatalogObjects(cfg.GPUClasses), refs...)
	ns := func(name string) naming.ObjectRef { return naming.ObjectRef{Kind: naming.KindNamespace, Name: name} }
	if cfg.DRAEnabled() {
		refs = append(refs, ns(dra.DefaultNamespace))
	}
	if cfg.PlatformInstalled() {
		refs = append(refs, ns(vcluster.DefaultPlatformNamespace))
	}
	if cfg.Monitoring.EnabledFor(cfg.Cloud) {
		refs = append(refs, ns(cfg.Monitoring.NamespaceOrDefault()))
	}
	return refs
}

// checkOwnership refuses, before anything is created, to manage an object that exists on the cluster and is not
// this stack's: server-side apply would otherwise take it over, and this stack's destroy would delete it. A cloud
// stack creates its own cluster, so only an existing cluster can hold another stack's objects. It lists each kind
// once rather than getting each object: client-go's default rate limit (5 requests a second after a burst of 10,
// k8s.io/client-go v0.34 rest/config.go DefaultQPS) made one GET per object cost 13 s at 20 tenants.
func checkOwnership(ctx context.Context, client metadata.Interface, owner string, refs []naming.ObjectRef, adopt []string,
	adoptKey *field.Path) error {
	owners := map[naming.ObjectRef]string{}
	listed := map[string]bool{}
	for _, ref := range refs {
		if listed[ref.Kind] {
			continue
		}
		listed[ref.Kind] = true
		list, err := client.Resource(ownedKinds[ref.Kind]).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("checking who owns the cluster's %s objects: %w", ref.Kind, err)
		}
		for _, item := range list.Items {
			owners[naming.ObjectRef{Kind: ref.Kind, Name: item.Name}] = item.Labels[naming.StackLabel]
		}
	}
	var problems []string
	for _, ref := range refs {
		current, exists := owners[ref]
		if !exists || current == owner || slices.Contains(adopt, ref.String()) {
			continue
		}
		who := "belongs to no stack (created by hand, or by a version of gpu-tenancy before owner labels)"
		if current != "" {
			who = fmt.Sprintf("belongs to stack %s", current)
		}
		problems = append(problems, fmt.Sprintf("  - %s %s exists and %s (label %s)", ref.Kind, ref.Name, who, naming.StackLabel))
	}
	if len(problems) == 0 {
		return nil
	}
	return &ownershipError{fmt.Sprintf("this stack (%s) would take over objects it does not own:\n%s\n"+
		"A cluster holds one platform stack: DeviceClasses, admission policies and namespaces have cluster-wide names. "+
		"Point this stack at its own cluster, or destroy the other stack first. To take an object over deliberately, "+
		"list it in %s (\"Kind/name\"), after the stack that owns it has stopped managing it",
		owner, strings.Join(problems, "\n"), adoptKey)}
}

// ownershipError is the refusal to manage objects of another owner, told apart from a cluster that cannot answer.
type ownershipError struct{ msg string }

func (e *ownershipError) Error() string { return e.msg }

// isUnreachable tells a cluster that does not answer (no HTTP status at all) from one that answers with an error.
func isUnreachable(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status)
}
