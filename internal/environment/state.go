package environment

import (
	"io"
	"os"

	"context"
	"encoding/json"
	"fmt"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/gpu-tenancy/gpu-tenancy/components/vcluster"
	"maps"
	"slices"
	"strings"
)

// stateResource is what the environment reads of a resource in a stack's state (pulumi sdk v3.274.1
// go/common/apitype/core.go ResourceV3).
type stateResource struct {
	URN     string `json:"urn"`
	Type    string `json:"type"`
	Parent  string `json:"parent"`
	Protect bool   `json:"protect"`
	Custom  bool   `json:"custom"`
	ID      string `json:"id"`
	// Outputs are the resource's outputs as last written, for the fields the environment reads (recordedNamespaces).
	Outputs json.RawMessage `json:"outputs"`
}

// Type tokens of the components that hold a tenant: each is named after the tenant, and every object of the tenant is
// below one of them.
const (
	tenantType         = "gpu-tenancy:tenancy:Tenant"
	virtualClusterType = "gpu-tenancy:vcluster:VirtualCluster"
)

// resources are the resources of the stack's state, in state order.
func (s *Stack) resources(ctx context.Context) ([]stateResource, error) {
	state, err := s.Export(ctx)
	if err != nil {
		return nil, fmt.Errorf("stack %s: reading its state: %w", s.opts.Stack, err)
	}
	if len(state.Deployment) == 0 {
		return nil, nil
	}
	var deployment struct {
		Resources []stateResource `json:"resources"`
	}
	if err := json.Unmarshal(state.Deployment, &deployment); err != nil {
		return nil, fmt.Errorf("stack %s: decoding its state: %w", s.opts.Stack, err)
	}
	return deployment.Resources, nil
}

// urnType is the type of a URN's resource, without its parents' types (urn:pulumi:<stack>::<project>::<parent
// types>$<type>::<name>).
func urnType(urn string) string {
	rest := strings.TrimSuffix(urn, "::"+urnName(urn))
	qualified := rest[strings.LastIndex(rest, "::")+2:]
	return qualified[strings.LastIndex(qualified, "$")+1:]
}

// urnName is the name part of a URN (urn:pulumi:<stack>::<project>::<type>::<name>).
func urnName(urn string) string {
	i := strings.LastIndex(urn, "::")
	if i < 0 {
		return ""
	}
	return urn[i+2:]
}

// tenantResources maps each tenant the state holds to the URNs of its components and everything below them.
func tenantResources(resources []stateResource) map[string][]string {
	children := map[string][]string{}
	for _, r := range resources {
		if r.Parent != "" {
			children[r.Parent] = append(children[r.Parent], r.URN)
		}
	}
	out := map[string][]string{}
	for _, r := range resources {
		if r.Type != tenantType && r.Type != virtualClusterType {
			continue
		}
		tenant := urnName(r.URN)
		queue := []string{r.URN}
		for len(queue) > 0 {
			urn := queue[0]
			queue = queue[1:]
			out[tenant] = append(out[tenant], urn)
			queue = append(queue, children[urn]...)
		}
	}
	return out
}

// Tenants names the tenants the stack's state holds, sorted.
func (s *Stack) Tenants(ctx context.Context) ([]string, error) {
	res, err := s.resources(ctx)
	if err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(tenantResources(res))), nil
}

// cliEnv is the environment the stack's workspace gives the pulumi CLI, for the commands the Automation API has no
// call for.
func (s *Stack) cliEnv() []string { return cliEnv(s.opts.Tools, s.env) }

// cliEnv is the environment of a pulumi CLI of tools (workspaceCLI) with env added.
func cliEnv(tools string, env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	if tools != "" {
		out = append(out, "PULUMI_HOME="+tools+"/pulumi-home", "PATH="+tools+"/bin:"+os.Getenv("PATH"))
	}
	return append(out, "PULUMI_SKIP_UPDATE_CHECK=true")
}

// run runs the pulumi CLI in the stack's workspace (whose project file names the backend).
func (s *Stack) run(ctx context.Context, args ...string) (string, error) {
	return s.runWithInput(ctx, nil, args...)
}

// runWithInput is run with stdin, for what must not stand on the command line, where every user of the machine can
// read it.
func (s *Stack) runWithInput(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	out, errOut, code, err := s.cli.Run(ctx, s.opts.WorkDir, stdin, nil, nil, s.cliEnv(), args...)
	if err != nil || code != 0 {
		return out, fmt.Errorf("pulumi %s: exit %d: %v: %s", strings.Join(args[:min(len(args), 3)], " "), code, err, strings.TrimSpace(errOut))
	}
	return out, nil
}

// unprotect lifts the protection of the resources named, so that the next operation may delete them.
func (s *Stack) unprotect(ctx context.Context, urns []string) error {
	if len(urns) == 0 {
		return nil
	}
	_, err := s.run(ctx, append([]string{"state", "unprotect", "--stack", s.opts.Stack, "--yes"}, urns...)...)
	return err
}

// unprotectAll lifts the protection of every resource of the stack: for a destroy, which is the decision to delete
// them all.
func (s *Stack) unprotectAll(ctx context.Context, res []stateResource) error {
	var protected []string
	for _, r := range res {
		if r.Protect {
			protected = append(protected, r.URN)
		}
	}
	return s.unprotect(ctx, protected)
}

// Name is the stack's name.
func (s *Stack) Name() string { return s.opts.Stack }

// deviceClassType is the type token of a catalog class's DeviceClass, which the catalog names <catalog>-<class>.
const deviceClassType = "kubernetes:resource.k8s.io/v1:DeviceClass"

// catalogType is the catalog's component type; its children's URNs carry it before their own type.
const catalogType = "gpu-tenancy:tenancy:Catalog"

// retiredCatalogObjects are, by type token and resource name, what an earlier version's catalog created and this one
// no longer declares: the protection the catalog gave them would fail the up that deletes them.
var retiredCatalogObjects = map[string]string{
	// The one priority level every tenant shared, before each tenant had a level of its own (docs/benchmarks.md, "API fairness").
	"kubernetes:flowcontrol.apiserver.k8s.io/v1:PriorityLevelConfiguration": platform.CatalogName + "-tenants-priority-level",
}

// unprotectDropped lifts the protection of the DeviceClasses of classes the config no longer lists, and of the catalog
// objects this version retired, so the up deletes them; a class still in config keeps the protection the catalog gives
// it while tenants exist. It also lifts that of each vCluster's rendered config (renderedConfigs), so a change of a
// kept tenant's vCluster settings can replace it.
func (s *Stack) unprotectDropped(ctx context.Context, res []stateResource) error {
	var urns []string
	for _, r := range droppedResources(res, s.args.ClassNames(), s.platformFreeTenants()) {
		s.say("%s: %s %s is no longer in the program: lifting its protection, so this up deletes it", s.opts.Stack,
			r.Type[strings.LastIndex(r.Type, ":")+1:], urnName(r.URN))
		urns = append(urns, r.URN)
	}
	for _, r := range renderedConfigs(res) {
		urns = append(urns, r.URN)
	}
	return s.unprotect(ctx, urns)
}

// The vCluster chart's config Secret, as a child of the chart the program installs for each tenant.
const (
	secretType         = "kubernetes:core/v1:Secret"
	networkPolicyType  = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
	chartInURN         = "$kubernetes:helm.sh/v4:Chart$"
	renderedConfigPath = "/" + vcluster.ConfigSecretPrefix
)

// renderedConfigs are the protected config Secrets of the tenants' vClusters: the chart renders each from the tenant's
// vCluster values (loft-sh/vcluster v0.36.1 chart/templates/config-secret.yaml), and the kubernetes provider replaces
// a Secret whose data changes, which the protection of every tenant object refuses, so a kept tenant's vCluster
// settings (its gpuAccess, its Pod Security level, the images) could never change. The Secret holds those values and
// nothing of the tenant's; the program protects it again as it writes it, and the tenant's namespace, volumes and
// Secrets keep their protection.
func renderedConfigs(res []stateResource) []stateResource {
	var out []stateResource
	for _, r := range res {
		if r.Protect && r.Type == secretType && strings.Contains(r.URN, chartInURN) && strings.Contains(urnName(r.URN), renderedConfigPath) {
			out = append(out, r)
		}
	}
	return out
}

// platformFreeTenants are the tenants of the config whose vCluster connects to no platform (gpuAccess without claim
// sync).
func (s *Stack) platformFreeTenants() []string {
	var out []string
	for _, t := range s.args.Tenants {
		if !s.args.GPUAccessOf(t).SyncsClaims() {
			out = append(out, t.Name)
		}
	}
	return out
}

// droppedResources are the protected resources of the state that the program no longer declares: the DeviceClasses of
// classes not among classNames, the retired catalog objects, and the platform's ingress policy and access key Secret of
// each tenant of platformFree, whose vCluster connects to no platform.
func droppedResources(res []stateResource, classNames, platformFree []string) []stateResource {
	var dropped []stateResource
	for _, r := range res {
		if !r.Protect {
			continue
		}
		name := urnName(r.URN)
		switch {
		case slices.ContainsFunc(platformFree, func(t string) bool {
			return r.Type == networkPolicyType && name == t+"-"+tenancy.PlatformIngressPolicy ||
				r.Type == secretType && name == t+vcluster.APIKeyResourceSuffix
		}):
			dropped = append(dropped, r)
		case r.Type == deviceClassType:
			if !slices.ContainsFunc(classNames, func(class string) bool { return name == platform.CatalogName+"-"+class }) {
				dropped = append(dropped, r)
			}
		case retiredCatalogObjects[r.Type] == name && strings.Contains(r.URN, "::"+catalogType+"$"):
			dropped = append(dropped, r)
		}
	}
	return dropped
}

// unprotectRetiredTenants lifts the protection of the tenants the stack's state holds that the stack file retires
// (retiredTenants), so the up deletes them. A tenant the state holds and the stack file lists nowhere is refused
// (unlisted): a tenant leaves only by being retired, never by a lost line. A listed tenant keeps its protection,
// which fails an up that would delete it.
func (s *Stack) unprotectRetiredTenants(ctx context.Context) error {
	res, err := s.resources(ctx)
	if err != nil {
		return err
	}
	held := tenantResources(res)
	if err := unlisted(s.opts.Stack, slices.Collect(maps.Keys(held)), s.args); err != nil {
		return err
	}
	protected := map[string]bool{}
	for _, r := range res {
		protected[r.URN] = r.Protect
	}
	if err := s.unprotectDropped(ctx, res); err != nil {
		return err
	}
	var urns []string
	for _, tenant := range slices.Sorted(maps.Keys(held)) {
		if !slices.Contains(s.args.RetiredTenants, tenant) {
			continue
		}
		s.say("%s: tenant %s is retired (retiredTenants): lifting the protection of its %d resources, so this up deletes it "+
			"with its namespace, volumes and vCluster", s.opts.Stack, tenant, len(held[tenant]))
		for _, urn := range held[tenant] {
			if protected[urn] {
				urns = append(urns, urn)
			}
		}
	}
	return s.unprotect(ctx, urns)
}

// unlisted refuses the tenants that stack holds and the stack file lists neither in tenants nor in retiredTenants,
// naming them and the two ways on.
func unlisted(stack string, held []string, args *platform.PlatformArgs) error {
	var lost []string
	for _, t := range held {
		if !slices.Contains(args.TenantNames(), t) && !slices.Contains(args.RetiredTenants, t) {
			lost = append(lost, t)
		}
	}
	if len(lost) == 0 {
		return nil
	}
	slices.Sort(lost)
	return fmt.Errorf("stack %s holds tenant %s, which the stack file lists neither in tenants nor in retiredTenants: "+
		"nothing is deleted for a missing line. Put its entry back in tenants to keep it, or name it in retiredTenants to "+
		"delete it with its namespace, volumes and vCluster", stack, strings.Join(lost, ", "))
}
