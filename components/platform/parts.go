package platform

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

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

// TenantGroup is the group of a tenant among groups: a hash of its name, so that a tenant stays in its group
// whatever other tenants come and go. Changing the number of groups moves tenants; the ownership check then
// refuses, before anything is changed, to let a stack take over another stack's tenant.
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
		if TenantGroup(t.Name, c.TenantGroups) == group {
			tenants = append(tenants, t)
		}
	}
	return false, tenants
}

// validateParts checks the number of groups and that a group stack's group is one of the environment's.
func validateParts(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	if c.TenantGroups < 0 {
		return field.ErrorList{field.Invalid(path(keyTenantGroups), c.TenantGroups, "must be 0 (one stack) or more")}
	}
	if group, ok := c.part.Group(); ok && group >= c.TenantGroups {
		return field.ErrorList{field.Invalid(path(keyTenantGroups), c.TenantGroups, fmt.Sprintf(
			"this stack is named for tenant group %d (%s), which an environment of %d groups does not have: "+
				"destroy the stack, or raise the number of groups", group, c.part, c.TenantGroups))}
	}
	return nil
}

// TenantsOf names the tenants the stack of the environment builds: its group's in an environment of tenant groups,
// none on the platform stack, every tenant without groups.
func (c *PlatformArgs) TenantsOf(stack string) []string {
	a := *c
	a.part = PartOf(stack, c.TenantGroups)
	_, tenants := a.builds()
	names := make([]string, len(tenants))
	for i, t := range tenants {
		names[i] = t.Name
	}
	return names
}
