package environment

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/components/tenancy"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/events"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	yamlv3 "go.yaml.in/yaml/v3"
)

// MovePlan is what a move hands over to one group stack: each tenant's resources, in the state, from the group
// stack that holds it.
type MovePlan struct {
	To    string
	Moves []TenantMove
}

// TenantMove is one tenant of a move: the stack it leaves (empty for a tenant not created yet, whose group is only
// recorded; the destination for a tenant its state holds already, as a move that did not finish leaves it) and its
// resources there.
type TenantMove struct {
	Tenant, From string
	Resources    []string
	// AlsoIn is the stack that still holds a copy of a tenant the destination holds whole: what a move killed between
	// `pulumi state move`'s two writes (the destination's, then the source's) leaves. The move drops that copy from
	// its state.
	AlsoIn string
}

// Resources counts the resources the move hands over.
func (p MovePlan) Resources() int {
	n := 0
	for _, m := range p.Moves {
		n += len(m.Resources)
	}
	return n
}

func (p MovePlan) String() string {
	var lines []string
	for _, m := range p.Moves {
		if m.From == "" {
			lines = append(lines, fmt.Sprintf("tenant %s: not created yet; its group is recorded, and %s creates it", m.Tenant, p.To))
			continue
		}
		if m.From == p.To {
			also := ""
			if m.AlsoIn != "" {
				also = fmt.Sprintf("; its copy in %s's state, left by a move stopped between its two writes, is dropped from that state", m.AlsoIn)
			}
			lines = append(lines, fmt.Sprintf("tenant %s: already in %s's state (a move that did not finish, or none "+
				"was needed)%s; its group is recorded, and %s's up takes over whatever of it still carries another "+
				"stack's owner label", m.Tenant, p.To, also, p.To))
			continue
		}
		types := map[string]int{}
		for _, urn := range m.Resources {
			types[ownType(urn)]++
		}
		var counts []string
		for _, t := range slices.Sorted(maps.Keys(types)) {
			counts = append(counts, fmt.Sprintf("%d %s", types[t], t))
		}
		lines = append(lines, fmt.Sprintf("tenant %s: %d resources from stack %s (%s)", m.Tenant, len(m.Resources), m.From,
			strings.Join(counts, ", ")))
	}
	return fmt.Sprintf("move to stack %s, in the state only (no object on the cluster is deleted, created or replaced); then "+
		"%s's up marks the tenants' objects as its own (owner label %s):\n  %s", p.To, p.To, naming.StackLabel,
		strings.Join(lines, "\n  "))
}

// Move hands tenants from the group stacks that hold them to group to, without touching the cluster, under the
// environment's lock: it backs up every stack involved, moves the tenants' resources in the state (`pulumi state
// move`, one per source stack: pulumi pkg v3.274.1 cmd/pulumi/state/state_move.go), records their group in the stack
// file, then previews every stack involved and refuses (restoring every state and the stack file) unless none would
// delete, create or replace anything of a tenant; then it brings the destination up, which relabels the tenants'
// objects as its own. With preview, it says what it would move and changes nothing. Run again after a move that
// stopped half-way (killed after a state move, or its destination's up failed), it finishes it: the tenants the
// destination holds already have their group recorded and their objects taken over.
func (e *Environment) Move(ctx context.Context, tenants []string, to int, preview bool) (MovePlan, error) {
	var plan MovePlan
	if e.groups == 0 {
		return plan, fmt.Errorf("environment %s has no tenant groups (gpu-tenancy:tenantGroups): nothing to move between", e.Name())
	}
	if to < 0 || to >= e.groups {
		return plan, fmt.Errorf("group %d is not one of environment %s's %d groups (0 to %d)", to, e.Name(), e.groups, e.groups-1)
	}
	if len(tenants) == 0 {
		return plan, fmt.Errorf("no tenant to move")
	}
	for _, t := range tenants {
		if !slices.Contains(e.Stacks[0].args.TenantNames(), t) {
			return plan, fmt.Errorf("tenant %s is not in the stack file %s: %s", t, e.opts.StackFile, strings.Join(e.Stacks[0].args.TenantNames(), ", "))
		}
	}
	var unlock func()
	if !preview {
		var err error
		if unlock, err = e.lock(ctx, strings.TrimSpace(naming.EnvironmentLockMove)); err != nil {
			return plan, err
		}
		defer unlock()
	}
	var dest *Stack
	holders := map[string][]*Stack{}
	stateOf := map[*Stack][]stateResource{}
	for _, s := range e.groupStacks() {
		if g, _ := platform.PartOf(s.opts.Stack, e.groups).Group(); g == to && !e.leftover(s) {
			dest = s
		}
		res, err := s.resources(ctx)
		if err != nil {
			return plan, err
		}
		stateOf[s] = res
		held := tenantResources(res)
		for _, t := range tenants {
			if _, ok := held[t]; ok {
				holders[t] = append(holders[t], s)
			}
		}
	}
	if dest == nil {
		return plan, fmt.Errorf("environment %s has no stack for group %d", e.Name(), to)
	}
	from := map[string]*Stack{}
	// copies are the tenants the destination holds whole that another stack holds too, by that stack.
	copies := map[*Stack][]string{}
	for _, t := range tenants {
		switch hs := holders[t]; {
		case len(hs) == 1:
			from[t] = hs[0]
		case len(hs) == 2 && slices.Contains(hs, dest):
			other := hs[0]
			if other == dest {
				other = hs[1]
			}
			if differs := copyDiffers(stateOf[dest], stateOf[other], t); len(differs) > 0 {
				return plan, fmt.Errorf("tenant %s is held by both %s and %s, and the two copies differ in %d places (%s): "+
					"restore one from its backup first", t, other.opts.Stack, dest.opts.Stack, len(differs), differs[0])
			}
			from[t] = dest
			copies[other] = append(copies[other], t)
		case len(hs) > 1:
			names := make([]string, len(hs))
			for i, h := range hs {
				names[i] = h.opts.Stack
			}
			return plan, fmt.Errorf("tenant %s is held by %s: restore all but one from their backups first", t, strings.Join(names, " and "))
		}
	}
	plan.To = dest.opts.Stack
	// The tenants' top components, by source stack: every resource below them follows (state_move.go moves children
	// with them).
	tops := map[*Stack][]string{}
	// A tenant the destination holds already is the work of a move that stopped after handing the state over (before
	// recording the group, or before the destination's up took the objects over): this move finishes it.
	resuming := false
	for _, t := range tenants {
		src, ok := from[t]
		if !ok {
			plan.Moves = append(plan.Moves, TenantMove{Tenant: t})
			continue
		}
		if src == dest {
			resuming = true
			m := TenantMove{Tenant: t, From: dest.opts.Stack}
			for other, ts := range copies {
				if slices.Contains(ts, t) {
					m.AlsoIn = other.opts.Stack
				}
			}
			plan.Moves = append(plan.Moves, m)
			continue
		}
		urns := tenantResources(stateOf[src])[t]
		plan.Moves = append(plan.Moves, TenantMove{Tenant: t, From: src.opts.Stack, Resources: urns})
		held := map[string]bool{}
		for _, urn := range urns {
			held[urn] = true
		}
		for _, r := range stateOf[src] {
			if held[r.URN] && !held[r.Parent] {
				tops[src] = append(tops[src], r.URN)
			}
		}
	}
	if preview {
		return plan, nil
	}
	if len(tops) == 0 && !resuming {
		// None created yet: only their records change.
		return plan, e.recordGroups(tenants, to)
	}
	involved := []*Stack{dest}
	for _, s := range e.groupStacks() {
		_, moving := tops[s]
		_, copying := copies[s]
		if moving || copying {
			involved = append(involved, s)
		}
	}
	// A move needs every stack involved as the program builds it: a pending change would mix with the move. A
	// destination that holds tenants of an unfinished move would delete them until their group is recorded: it is
	// checked after that, as below, where any pending change of it refuses the move too.
	for _, s := range involved {
		if s == dest && resuming {
			continue
		}
		if bad, err := s.refusedSteps(ctx, []apitype.OpType{apitype.OpCreate, apitype.OpDelete, apitype.OpReplace}); err != nil || len(bad) > 0 {
			if err == nil {
				err = fmt.Errorf("its preview would %s", strings.Join(bad, ", "))
			}
			return plan, fmt.Errorf("moving %s: stack %s is not converged (%v): run gpu-tenancy up %s first",
				strings.Join(tenants, ", "), s.opts.Stack, err, e.Name())
		}
	}
	backups, backupDir, err := e.backup(ctx, involved...)
	if err != nil {
		return plan, err
	}
	stackFile, err := os.ReadFile(e.opts.StackFile)
	if err != nil {
		return plan, err
	}
	// restore puts every state and the stack file back, and says so only when each was put back; otherwise it says
	// which were not, and how to put them back by hand from the backups.
	restoreState := e.restoreState
	if restoreState == nil {
		restoreState = func(ctx context.Context, s *Stack, state apitype.UntypedDeployment) error {
			return s.Import(ctx, state)
		}
	}
	restore := func(cause error) error {
		var failed []string
		for _, s := range slices.SortedFunc(maps.Keys(backups), func(a, b *Stack) int { return strings.Compare(a.opts.Stack, b.opts.Stack) }) {
			if err := restoreState(context.Background(), s, backups[s]); err != nil {
				file := filepath.Join(backupDir, s.opts.Stack+".json")
				failed = append(failed, fmt.Sprintf("stack %s was not restored (%v): run pulumi stack import --stack %s --file %s",
					s.opts.Stack, err, s.opts.Stack, file))
			}
		}
		if err := os.WriteFile(e.opts.StackFile, stackFile, 0o644); err != nil {
			failed = append(failed, fmt.Sprintf("the stack file was not restored (%v): copy %s over %s", err,
				filepath.Join(backupDir, filepath.Base(e.opts.StackFile)), e.opts.StackFile))
		}
		if len(failed) > 0 {
			return fmt.Errorf("moving %s to %s: %v; the move was undone only in part, so the states and the stack file "+
				"disagree until you finish by hand, with %s=%s (backups in %s):\n  - %s", strings.Join(tenants, ", "),
				dest.opts.Stack, cause, BackendEnv, dest.opts.Backend, backupDir, strings.Join(failed, "\n  - "))
		}
		return fmt.Errorf("moving %s to %s: %v; every state and the stack file are as before (backups in %s)",
			strings.Join(tenants, ", "), dest.opts.Stack, cause, backupDir)
	}
	dest.say("%s", plan)
	for _, src := range involved[1:] {
		if ts := copies[src]; len(ts) > 0 {
			if err := src.dropTenants(ctx, backups[src], stateOf[src], ts); err != nil {
				return plan, restore(err)
			}
		}
		if len(tops[src]) == 0 {
			continue
		}
		if _, err := dest.run(ctx, append([]string{"state", "move", "--source", src.opts.Stack, "--dest", dest.opts.Stack, "--yes"}, tops[src]...)...); err != nil {
			return plan, restore(err)
		}
	}
	if err := e.recordGroups(tenants, to); err != nil {
		return plan, restore(err)
	}
	// The destination takes over the tenants' objects from the sources' owner label, for this run only.
	adopt, err := e.reopen(ctx, dest, ownershipAdopt(e.Stacks[0].args.Ownership.Adopt, tenants))
	if err != nil {
		return plan, restore(err)
	}
	checks := []struct {
		s      *Stack
		refuse []apitype.OpType
	}{{adopt, []apitype.OpType{apitype.OpCreate, apitype.OpDelete, apitype.OpReplace, apitype.OpCreateReplacement, apitype.OpDeleteReplaced}}}
	for _, src := range involved[1:] {
		source, err := e.reopen(ctx, src, nil)
		if err != nil {
			return plan, restore(err)
		}
		checks = append(checks, struct {
			s      *Stack
			refuse []apitype.OpType
		}{source, []apitype.OpType{apitype.OpDelete, apitype.OpReplace, apitype.OpDeleteReplaced}})
	}
	for _, check := range checks {
		if bad, err := check.s.refusedSteps(ctx, check.refuse); err != nil || len(bad) > 0 {
			if err == nil {
				err = fmt.Errorf("a preview of %s after the move would %s", check.s.opts.Stack, strings.Join(bad, "; "))
			}
			return plan, restore(err)
		}
	}
	if _, err := adopt.Up(ctx); err != nil {
		return plan, fmt.Errorf("moving %s: the state is moved and the group recorded, but the up of %s failed: %w; "+
			"run the same move again (gpu-tenancy move %s %s --to %d), which finishes it (the states and the stack "+
			"file before the move: %s)", strings.Join(tenants, ", "), dest.opts.Stack, err, e.Name(),
			strings.Join(tenants, " "), to, backupDir)
	}
	return plan, nil
}

// copyDiffers says how dest's copy of tenant differs from other's, nothing when they are the same: what `pulumi state
// move` writes to the destination before it writes the source (pulumi pkg v3.274.1 cmd/pulumi/state/state_move.go),
// unless either stack changed since. Each resource is compared by its place below the tenant's components (the own
// types and names from the component down) and its ID, since the move rewrites URNs: the stack's name, and the parent
// types of the tenant's top components, which it makes children of the stack (the program's NoParent alias maps them
// back on the next up), and so of everything below them.
func copyDiffers(dest, other []stateResource, tenant string) []string {
	inDest, inOther := tenantCopy(dest, tenant), tenantCopy(other, tenant)
	var differs []string
	for _, place := range slices.Sorted(maps.Keys(inOther)) {
		switch id, ok := inDest[place]; {
		case !ok:
			differs = append(differs, "missing "+place)
		case id != inOther[place]:
			differs = append(differs, fmt.Sprintf("%s has ID %q, not %q", place, id, inOther[place]))
		}
	}
	for _, place := range slices.Sorted(maps.Keys(inDest)) {
		if _, ok := inOther[place]; !ok {
			differs = append(differs, "only in the destination: "+place)
		}
	}
	return differs
}

// tenantCopy is each resource of tenant in a stack's state by its place below the tenant's components, with its ID.
func tenantCopy(res []stateResource, tenant string) map[string]string {
	byURN := map[string]stateResource{}
	for _, r := range res {
		byURN[r.URN] = r
	}
	mine := map[string]bool{}
	for _, urn := range tenantResources(res)[tenant] {
		mine[urn] = true
	}
	out := map[string]string{}
	for urn := range mine {
		var place []string
		for at := urn; mine[at]; at = byURN[at].Parent {
			place = append([]string{typeAndName(at)}, place...)
		}
		out[strings.Join(place, " / ")] = byURN[urn].ID
	}
	return out
}

// typeAndName is a URN's own type and name.
func typeAndName(urn string) string { return ownType(urn) + "::" + urnName(urn) }

// ownType is a URN's own type: the last of its qualified type (urn:pulumi:<stack>::<project>::<parent
// types>$<type>::<name>).
func ownType(urn string) string {
	parts := strings.Split(urn, "::")
	typ := parts[len(parts)-2]
	return typ[strings.LastIndex(typ, "$")+1:]
}

// dropTenants removes the tenants' resources from the stack's state (state is its deployment as exported, res its
// resources), touching nothing on the cluster: for the copy of a tenant another stack holds whole.
func (s *Stack) dropTenants(ctx context.Context, state apitype.UntypedDeployment, res []stateResource, tenants []string) error {
	drop := map[string]bool{}
	held := tenantResources(res)
	for _, t := range tenants {
		for _, urn := range held[t] {
			drop[urn] = true
		}
	}
	var deployment map[string]json.RawMessage
	if err := json.Unmarshal(state.Deployment, &deployment); err != nil {
		return fmt.Errorf("stack %s: decoding its state: %w", s.opts.Stack, err)
	}
	var resources []json.RawMessage
	if err := json.Unmarshal(deployment["resources"], &resources); err != nil {
		return fmt.Errorf("stack %s: decoding its resources: %w", s.opts.Stack, err)
	}
	kept := resources[:0]
	for _, raw := range resources {
		var r struct {
			URN string `json:"urn"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("stack %s: decoding a resource: %w", s.opts.Stack, err)
		}
		if !drop[r.URN] {
			kept = append(kept, raw)
		}
	}
	var err error
	if deployment["resources"], err = json.Marshal(kept); err != nil {
		return err
	}
	if state.Deployment, err = json.Marshal(deployment); err != nil {
		return err
	}
	s.say("%s: dropping from its state the copy of %s that a move stopped between its two writes left (%d resources; "+
		"the destination holds them whole)", s.opts.Stack, strings.Join(tenants, ", "), len(resources)-len(kept))
	return s.Import(ctx, state)
}

// recordGroups records group for each tenant in the environment's stack file.
func (e *Environment) recordGroups(tenants []string, group int) error {
	for _, t := range tenants {
		if err := recordGroup(e.opts.StackFile, t, group); err != nil {
			return err
		}
	}
	return nil
}

// backup exports the stacks' states and copies the stack file into a directory of the environment's work directory,
// and returns the states for a restore, and the directory.
func (e *Environment) backup(ctx context.Context, stacks ...*Stack) (map[*Stack]apitype.UntypedDeployment, string, error) {
	dir := filepath.Join(e.opts.WorkDir+".backups", time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	stackFile, err := os.ReadFile(e.opts.StackFile)
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(e.opts.StackFile)), stackFile, 0o600); err != nil {
		return nil, "", err
	}
	out := map[*Stack]apitype.UntypedDeployment{}
	for _, s := range stacks {
		state, err := s.Export(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("backing up stack %s: %w", s.opts.Stack, err)
		}
		// The whole export, version included, as `pulumi stack export` writes it: `pulumi stack import --file` refuses
		// a bare deployment (pulumi pkg v3.274.1 resource/stack/deployment.go, "schema version too old").
		raw, err := json.Marshal(state)
		if err != nil {
			return nil, "", err
		}
		file := filepath.Join(dir, s.opts.Stack+".json")
		if err := os.WriteFile(file, raw, 0o600); err != nil {
			return nil, "", err
		}
		s.say("backed up stack %s to %s (restore: pulumi stack import --stack %s --file %s)", s.opts.Stack, file, s.opts.Stack, file)
		out[s] = state
	}
	return out, dir, nil
}

// reopen opens a stack of the environment again, with config overrides, after its stack file changed.
func (e *Environment) reopen(ctx context.Context, s *Stack, config map[string]string) (*Stack, error) {
	o := s.opts
	o.Config = maps.Clone(o.Config)
	if o.Config == nil {
		o.Config = map[string]string{}
	}
	maps.Copy(o.Config, config)
	return Open(ctx, o)
}

// ownershipAdopt is the ownership key that lets a stack take moved tenants' cluster-wide objects over.
func ownershipAdopt(adopt []string, tenants []string) map[string]string {
	all := slices.Clone(adopt)
	for _, ref := range tenancy.TenantObjects(tenants) {
		all = append(all, ref.String())
	}
	return map[string]string{platform.ConfigNamespace + ":ownership": fmt.Sprintf(`{"adopt": %s}`, jsonList(all))}
}

func jsonList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// refusedSteps previews the stack and names the steps of the refused kinds it would take, each with its resource. The
// delete of a provider is not refused: `pulumi state move` copies the source's provider along with the tenant's
// resources (pkg v3.274.1 cmd/pulumi/state/state_move.go), the destination's program moves them onto its own provider
// of the same cluster, and the copy's delete only drops it from the state. Nor is a provider's create: a group that
// held no tenant yet has not made the providers its program uses (the stack reference's default pulumi provider
// among them), and a provider's create creates nothing on the cluster.
func (s *Stack) refusedSteps(ctx context.Context, refused []apitype.OpType) ([]string, error) {
	ch := make(chan events.EngineEvent)
	var bad []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range ch {
			if ev.ResourcePreEvent == nil {
				continue
			}
			m := ev.ResourcePreEvent.Metadata
			if !slices.Contains(refused, m.Op) || ((m.Op == apitype.OpDelete || m.Op == apitype.OpCreate) && strings.HasPrefix(m.Type, "pulumi:providers:")) {
				continue
			}
			bad = append(bad, fmt.Sprintf("%s %s %s", m.Op, m.Type, urnName(m.URN)))
		}
	}()
	_, err := s.Preview(ctx, optpreview.EventStreams(ch))
	<-done
	return bad, err
}

// recordGroup records a tenant's group in the stack file: the group key of its tenants[] entry, set or replaced,
// the rest of the file (its comments included) as it was.
func recordGroup(stackFile, tenant string, group int) error {
	raw, err := os.ReadFile(stackFile)
	if err != nil {
		return err
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("%s: %w", stackFile, err)
	}
	entry, err := tenantEntry(&doc, tenant)
	if err != nil {
		return fmt.Errorf("%s: %w", stackFile, err)
	}
	value := &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!int", Value: fmt.Sprint(group)}
	set := false
	for i := 0; i+1 < len(entry.Content); i += 2 {
		if entry.Content[i].Value == "group" {
			entry.Content[i+1] = value
			set = true
		}
	}
	if !set {
		entry.Content = append(entry.Content, &yamlv3.Node{Kind: yamlv3.ScalarNode, Tag: "!!str", Value: "group"}, value)
	}
	var out strings.Builder
	enc := yamlv3.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	info, err := os.Stat(stackFile)
	if err != nil {
		return err
	}
	return os.WriteFile(stackFile, []byte(out.String()), info.Mode().Perm())
}

// tenantEntry finds the mapping of a tenant in a stack file's gpu-tenancy:tenants.
func tenantEntry(doc *yamlv3.Node, tenant string) (*yamlv3.Node, error) {
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("empty stack file")
	}
	root := doc.Content[0]
	config := mapValue(root, "config")
	if config == nil {
		return nil, fmt.Errorf("no config")
	}
	tenants := mapValue(config, platform.ConfigNamespace+":tenants")
	if tenants == nil || tenants.Kind != yamlv3.SequenceNode {
		return nil, fmt.Errorf("no %s:tenants list", platform.ConfigNamespace)
	}
	for _, t := range tenants.Content {
		if name := mapValue(t, "name"); name != nil && name.Value == tenant {
			return t, nil
		}
	}
	return nil, fmt.Errorf("no tenant %s in %s:tenants", tenant, platform.ConfigNamespace)
}

func mapValue(m *yamlv3.Node, key string) *yamlv3.Node {
	if m == nil || m.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// Import replaces the stack's state with a deployment (a backup).
func (s *Stack) Import(ctx context.Context, state apitype.UntypedDeployment) error {
	return s.Stack.Import(ctx, state)
}
