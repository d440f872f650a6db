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

// Parts are the stacks of the environment in the order they come up: the platform, then each tenant group (which
// come up in parallel). One stack, the zero Part, without tenant groups.
func (c *PlatformArgs) Parts() []Part {
	if c.TenantGroups == 0 {
		return []Part{""}
	}
	parts := []Part{PlatformPart}
	for i := range c.TenantGroups {
		parts = append(parts, TenantsPart(i))
	}
	return parts
}

// builds says what the args' part builds: the platform's shared parts, and which tenants.
func (c *PlatformArgs) builds() (platform bool, tenants []TenantArgs) {
	group, isGroup := c.Part.Group()
	if c.Part == PlatformPart {
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

// validateParts checks the number of groups and that the part is one of the environment's.
func validateParts(c *PlatformArgs, path func(string) *field.Path) field.ErrorList {
	if c.TenantGroups < 0 {
		return field.ErrorList{field.Invalid(path(keyTenantGroups), c.TenantGroups, "must be 0 (one stack) or more")}
	}
	var allowed []string
	for _, p := range c.Parts() {
		if p == c.Part {
			return nil
		}
		allowed = append(allowed, string(p))
	}
	switch {
	case c.TenantGroups == 0:
		return field.ErrorList{field.Forbidden(path(keyPart), fmt.Sprintf(
			"is for an environment split into tenant groups (%s), which this one is not", path(keyTenantGroups)))}
	case c.Part == "":
		return field.ErrorList{field.Required(path(keyPart), fmt.Sprintf("with %s set, the environment is %d stacks "+
			"(%s): bring it up with `make stack`, which runs each with its part", path(keyTenantGroups), len(allowed),
			strings.Join(allowed, ", ")))}
	}
	return field.ErrorList{field.NotSupported(path(keyPart), string(c.Part), allowed)}
}
