package plan

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteTree writes a short summary for people: every component with a count per type of the resources it holds
// directly and its child components indented beneath, then a count per type over the whole stack.
func (p *Plan) WriteTree(w io.Writer) error {
	known := make(map[string]bool, len(p.Resources))
	for _, r := range p.Resources {
		known[r.urn] = true
	}
	// Top-level resources hang off the root stack, which is not a registration; they gather under "".
	children := map[string][]Resource{}
	for _, r := range p.Resources {
		parent := r.parentURN
		if !known[parent] {
			parent = ""
		}
		children[parent] = append(children[parent], r)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "stack %s: %s\n", p.Stack, plural(len(p.Resources)))
	writeGroup(&b, children, "", 1)
	b.WriteString("by type:\n")
	writeCounts(&b, p.Resources, 1)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeGroup(b *strings.Builder, children map[string][]Resource, urn string, depth int) {
	customs, components := members(children, urn)
	writeCounts(b, customs, depth)
	sort.SliceStable(components, func(i, j int) bool {
		if components[i].Type != components[j].Type {
			return components[i].Type < components[j].Type
		}
		return components[i].Name < components[j].Name
	})
	for _, c := range components {
		fmt.Fprintf(b, "%s%s %s (%s)\n", indent(depth), c.Type, c.Name, plural(descendants(children, c.urn)))
		writeGroup(b, children, c.urn, depth+1)
	}
}

// members splits what a component holds into resources and child components; a resource parented to another
// resource (a provider under its cluster) counts with the component that holds that resource.
func members(children map[string][]Resource, urn string) (customs, components []Resource) {
	for _, r := range children[urn] {
		if !r.leaf {
			components = append(components, r)
			continue
		}
		customs = append(customs, r)
		cs, comps := members(children, r.urn)
		customs = append(customs, cs...)
		components = append(components, comps...)
	}
	return customs, components
}

func writeCounts(b *strings.Builder, rs []Resource, depth int) {
	counts := map[string]int{}
	for _, r := range rs {
		label := r.Type
		if r.Read {
			label += " (read)"
		}
		counts[label]++
	}
	types := make([]string, 0, len(counts))
	for t := range counts {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(b, "%s%3d  %s\n", indent(depth), counts[t], t)
	}
}

func descendants(children map[string][]Resource, urn string) int {
	n := 0
	for _, c := range children[urn] {
		n += 1 + descendants(children, c.urn)
	}
	return n
}

func indent(depth int) string { return strings.Repeat("  ", depth) }

func plural(n int) string {
	if n == 1 {
		return "1 resource"
	}
	return fmt.Sprintf("%d resources", n)
}
