package platform

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/gpu-tenancy/gpu-tenancy/components/naming"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Part is what one stack of an environment split into tenant groups builds: the platform (cluster, driver, vCluster
// Platform, GPU catalog, monitoring) or the tenants of one group. The zero Part is the whole platform in one stack.
//
// The file state backend writes the whole state after every step, one write at a time (pulumi pkg v3.274.1
// pkg/backend/snapshot.go, defaultServiceLoop), so an update costs about the square of its stack's size; an
// environment split into stacks of a few tenants each costs about linearly in tenants (docs/architecture.md,
// "Scale").
type Part string

// PlatformPart is the platform stack of an environment with tenant groups.
const PlatformPart Part = "platform"

// TenantsPart is the stack of tenant group i.
func TenantsPart(i int) Part { return Part(fmt.Sprintf("tenants-%d", i)) }

// Group is the tenant group of a tenants part, and false for any other part.
func (p Part) Group() (int, bool) {
	rest, ok := strings.CutPrefix(string(p), "tenants-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == rest
}

// TenantGroup is the group a hash of the tenant's name places it in among groups. It places new tenants only: a
// tenant's group is the one its config records (tenants[].group), else the one whose stack holds its namespace on
// the cluster (LiveGroups), and only a tenant in neither is hashed (PlatformArgs.GroupOf). So a change of the number of
// groups moves no tenant; a tenant moves only by `gpu-tenancy move` (docs/architecture.md, "Scale").
func TenantGroup(tenant string, groups int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(tenant))
	return int(h.Sum32() % uint32(groups))
}

// PartOf is the part a stack of an environment in groups tenant groups builds, which its name says: <env> is the
// platform stack, <env>.tenants-<i> the stack of group i. Without tenant groups every stack is the whole platform.
func PartOf(stack string, groups int) Part {
	if groups == 0 {
		return ""
	}
	if dot := strings.LastIndexByte(stack, '.'); dot > 0 {
		if part := Part(stack[dot+1:]); isGroup(part) {
			return part
		}
	}
	return PlatformPart
}

func isGroup(p Part) bool { _, ok := p.Group(); return ok }

// EnvironmentStacks are the stacks of the environment whose stack file holds sc, named after stack: stack itself and,
// with tenant groups, <stack>.tenants-<i> for each, in the order Parts gives. Every one reads the same stack file.
func EnvironmentStacks(stack string, sc StackConfig) ([]string, error) {
	key := ConfigNamespace + ":" + keyTenantGroups
	groups := 0
	if raw, ok := sc.Values[key]; ok {
		var err error
		if groups, err = strconv.Atoi(raw); err != nil || groups < 0 {
			return nil, fmt.Errorf("stack %s: %s: %q is not 0 (one stack) or more", stack, key, raw)
		}
	}
	stacks := []string{stack}
	for i := range groups {
		stacks = append(stacks, stack+"."+string(TenantsPart(i)))
	}
	return stacks, nil
}

// GroupOf is the tenant group of a tenant of an environment with tenant groups: its recorded group, else the group
// whose stack holds its namespace (live, from LiveGroups), else its hash. A live group past the number of groups is
// not a placement: validation refuses the tenant's group instead (validateParts).
func (c *PlatformArgs) GroupOf(t TenantArgs) int {
	if t.Group != nil {
		return *t.Group
	}
	if g, ok := c.live[t.Name]; ok {
		return g
	}
	return TenantGroup(t.Name, c.TenantGroups)
}

// builds says what the args' part builds: the platform's shared parts, and which tenants.
func (c *PlatformArgs) builds() (platform bool, tenants []TenantArgs) {
	group, isGroup := c.part.Group()
	if c.part == PlatformPart {
		return true, nil
	}
	if !isGroup {
		return true, c.Tenants
	}
	for _, t := range c.Tenants {
		if c.GroupOf(t) == group {
			tenants = append(tenants, t)
		}
	}
	return false, tenants
}

// WithLiveGroups returns the args with the groups whose stacks hold tenants' namespaces on the cluster (LiveGroups),
// which place tenants whose config records no group.
func (c PlatformArgs) WithLiveGroups(live map[string]int) PlatformArgs {
	c.live = live
	return c
}

// LiveGroups reads, from the owner labels of the tenants' namespaces (naming.StackLabel), which group of the
// environment env of project holds each tenant: a namespace owned by stack <env>.tenants-<i> is group i's.
// Namespaces of other stacks, and of no stack, place nothing.
func LiveGroups(owners map[string]string, project, env string) map[string]int {
	live := map[string]int{}
	prefix := naming.StackOwner(project, env) + "."
	for tenant, owner := range owners {
		part, ok := strings.CutPrefix(owner, prefix)
		if !ok {
			continue
		}
		if g, ok := Part(part).Group(); ok {
			live[tenant] = g
		}
	}
	return live
}

// validateParts checks the number of groups, each tenant's group, and that a group stack's group is one of the
// environment's.
func validateParts(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	if c.TenantGroups < 0 {
		return field.ErrorList{field.Invalid(path(keyTenantGroups), c.TenantGroups, "must be 0 (one stack) or more")}
	}
	var errs field.ErrorList
	for i, t := range c.Tenants {
		gp := path(keyTenants).Index(i).Child("group")
		switch {
		case t.Group != nil && c.TenantGroups == 0:
			errs = append(errs, field.Forbidden(gp, fmt.Sprintf("places a tenant in a tenant group: set %s too", path(keyTenantGroups))))
		case t.Group != nil && (*t.Group < 0 || *t.Group >= c.TenantGroups):
			errs = append(errs, field.Invalid(gp, *t.Group, fmt.Sprintf("must be a group of the %d groups (0 to %d) of %s: to lower %s, "+
				"move the tenant to a lower group first (gpu-tenancy move <environment> %s --to <group>)",
				c.TenantGroups, c.TenantGroups-1, path(keyTenantGroups), path(keyTenantGroups), t.Name)))
		case t.Group == nil && c.TenantGroups > 0:
			if g, ok := c.live[t.Name]; ok && g >= c.TenantGroups {
				errs = append(errs, field.Invalid(path(keyTenantGroups), c.TenantGroups, fmt.Sprintf(
					"tenant %s lives in group %d (the stack of its namespace), which %d groups leave out: move it to a lower "+
						"group first (gpu-tenancy move <environment> %s --to <group>)", t.Name, g, c.TenantGroups, t.Name)))
			}
		}
	}
	if group, ok := c.part.Group(); ok && group >= c.TenantGroups {
		errs = append(errs, field.Invalid(path(keyTenantGroups), c.TenantGroups, fmt.Sprintf(
			"this stack is named for tenant group %d (%s), which an environment of %d groups does not have: "+
				"move its tenants to other groups, then destroy it (gpu-tenancy up removes an empty one)", group, c.part, c.TenantGroups)))
	}
	return errs
}
