package gpureport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"
)

// Format is an output format.
type Format string

// Output formats: a table for people, JSON and YAML for programs (the versioned shape of docs/cli.md).
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
)

// ParseFormat reads the -o flag.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case Table, JSON, YAML:
		return f, nil
	}
	return "", fmt.Errorf("output format %q is not one of table, json, yaml", s)
}

// Report is one of the report documents.
type Report interface {
	writeTable(w io.Writer) error
}

// Write renders a report. YAML goes through the JSON encoding, so both spell every field the same way.
//
// Reports quote text tenants write (event and condition messages, event names, a vCluster config's selector), which
// may hold terminal controls: an escape sequence that clears the screen, a carriage return that overwrites the line
// with a forged one. The table writes each such text through printable. JSON and YAML keep every string as it is,
// escaped: encoding/json escapes the C0 controls (ESC, CR ...), escapeJSONControls the rest, and the YAML encoder
// double-quotes and escapes any string with a character it cannot print.
func Write(w io.Writer, r Report, f Format) error {
	switch f {
	case JSON:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
		_, err := w.Write(escapeJSONControls(b.Bytes()))
		return err
	case YAML:
		doc, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		// The YAML decoder refuses DEL and C1 in its input, which encoding/json writes as they are.
		out, err := yaml.JSONToYAML(escapeJSONControls(doc))
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(out)
		return err
	default:
		return r.writeTable(w)
	}
}

// table writes aligned columns and returns the first write error once flushed.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer) *table {
	return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
}

// row writes one line of cells, each made printable: a cell may quote text a tenant wrote.
func (t *table) row(cells ...any) {
	if t.err != nil {
		return
	}
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = printable(fmt.Sprint(c))
	}
	_, t.err = fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() error {
	if err := t.tw.Flush(); t.err == nil {
		t.err = err
	}
	return t.err
}

func age(seconds int64) string {
	return duration.HumanDuration(time.Duration(seconds) * time.Second)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func optional(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// money writes a cost as its shortest decimal, "-" when there is none.
func money(v *float64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatFloat(*v, 'f', -1, 64)
}

func (r *CapacityReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("CLASS", "TENANTS", "EXIST", "ALLOCATED", "UNAVAILABLE", "FREE")
	for _, c := range r.Classes {
		t.row(c.Name, orDash(strings.Join(c.Tenants, ",")), c.Exist, c.Allocated, c.Unavailable, c.Free)
	}
	t.row()
	header := []any{"TENANT", "CLASS", "GRANTED", "ALLOCATED", "REQUESTED", "QUOTA", "PENDING", "OLDEST PENDING"}
	costHeader := "COST/H (" + r.Currency + ")"
	if r.Currency != "" {
		header = append(header, costHeader)
	}
	t.row(header...)
	for _, u := range r.Tenants {
		granted, oldest := "no", "-"
		if u.Granted {
			granted = "yes"
		}
		if u.Pending+u.PendingPods > 0 {
			oldest = age(u.OldestPendingSeconds)
		}
		pending := fmt.Sprint(u.Pending)
		if u.PendingPods > 0 {
			pending += fmt.Sprintf(" (+%d pods by name)", u.PendingPods)
		}
		cells := []any{u.Tenant, u.Class, granted, u.Allocated, optional(u.Requested), optional(u.Quota), pending, oldest}
		if r.Currency != "" {
			cells = append(cells, money(u.CostPerHour))
		}
		t.row(cells...)
	}
	if r.Currency != "" {
		t.row()
		t.row("TENANT", costHeader)
		for _, c := range r.TenantCosts {
			t.row(c.Tenant, money(&c.CostPerHour))
		}
	}
	t.row()
	t.row("POOL", "NODE", "GENERATION", "GPUS", "GPUS IN USE", "DEVICES", "ALLOCATED", "COMPLETE")
	for _, p := range r.Pools {
		complete := "yes"
		if p.Incomplete {
			complete = "no"
		}
		t.row(p.Pool, orDash(p.Node), p.Generation, p.PhysicalGPUs, p.GPUsInUse, p.Devices, p.AllocatedDevices, complete)
	}
	if a := r.ServiceAddresses; a != nil {
		t.row()
		t.row("SERVICE RANGE", "ADDRESSES", "USED", "FREE")
		t.row(strings.Join(a.Ranges, ","), a.Size, a.Used, a.Free)
		t.row()
		t.row("TENANT", "SERVICE ADDRESSES", "QUOTA")
		for _, ts := range a.Tenants {
			quota := "-"
			if ts.Quota != nil {
				quota = fmt.Sprint(*ts.Quota)
			}
			t.row(ts.Tenant, ts.Used, quota)
		}
	}
	for _, warn := range r.Warnings {
		t.row()
		t.row("warning: " + warn)
	}
	return t.flush()
}

func (r *PendingReport) writeTable(w io.Writer) error {
	if len(r.Claims) == 0 {
		_, err := fmt.Fprintln(w, "No pending claims.")
		return err
	}
	t := newTable(w)
	t.row("NAMESPACE", "TENANT", "CLAIM", "PODS", "CLASSES", "AGE", "REASON")
	for _, c := range r.Claims {
		claim := c.Claim
		switch {
		case claim == "" && len(c.ExtendedResources) > 0:
			claim = "(made when scheduled, for " + strings.Join(c.ExtendedResources, ",") + ")"
		case claim == "":
			claim = "(from template " + c.Template + ")"
		}
		a := age(c.AgeSeconds)
		if c.Overdue {
			a += " (overdue)"
		}
		for i, reason := range c.Reasons {
			text := reason.Kind
			if reason.From != (ReasonSource{}) {
				text += " [" + reason.From.label() + "]"
			}
			text += ": " + reason.Message
			if i == 0 {
				t.row(c.Namespace, orDash(c.Tenant), claim, orDash(strings.Join(c.Pods, ",")), orDash(strings.Join(c.Classes, ",")), a, text)
			} else {
				t.row("", "", "", "", "", "", text)
			}
		}
	}
	return t.flush()
}

func (r *AuditReport) writeTable(w io.Writer) error {
	s := r.Scope
	summary := fmt.Sprintf("audited %d tenants, %d DeviceClasses, %d tenant claims, %d vClusters",
		len(s.Tenants), s.DeviceClasses, s.TenantClaims, s.VClusters)
	if len(r.Findings) == 0 {
		_, err := fmt.Fprintf(w, "%s: no findings.\n", summary)
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d findings.\n", summary, len(r.Findings))
	// A message may quote a tenant's vCluster config: each field is made printable, so that no newline in it starts a
	// line of its own that passes for a finding or a fix.
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "\n%s  %s", f.Check, printable(f.Object.String()))
		if f.Tenant != "" {
			fmt.Fprintf(&b, "  (tenant %s)", f.Tenant)
		}
		fmt.Fprintf(&b, "\n    %s\n    fix: %s\n", printable(f.Message), printable(f.Fix))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printable makes text safe to print on a terminal, on one line. Runs of white space, line breaks and carriage
// returns among them, become one space, which keeps a multi-line message (some scheduler messages are) in its table
// cell and a forged line from overwriting or following a real one. Every other control character (C0, DEL, C1, and
// bytes that are not UTF-8, which a terminal may read as C1) is written as its Go escape, \x1b for ESC: visible, so
// that an operator sees that the text held one, and inert. So is every format character (Unicode category Cf): a
// bidirectional override (U+202E) makes a terminal show the rest of a row reversed, and zero-width ones hide text.
func printable(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r):
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// escapeJSONControls escapes the control characters encoding/json writes as they are, DEL and C1 (U+0080-U+009F),
// and the format characters (a bidirectional override reverses the rest of the line), as \u escapes: some terminals
// act on C1 even in UTF-8, and a JSON report is often read with cat. It stays the same JSON: those characters occur
// only inside strings, where the escape means the same character. (The YAML encoder writes format characters as they
// are; there each string is on a line of its own, which is as far as an override reaches.)
func escapeJSONControls(doc []byte) []byte {
	var b bytes.Buffer
	for len(doc) > 0 {
		r, size := utf8.DecodeRune(doc)
		if r == 0x7f || (r >= 0x80 && r <= 0x9f) || unicode.Is(unicode.Cf, r) {
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		} else {
			b.Write(doc[:size])
		}
		doc = doc[size:]
	}
	return b.Bytes()
}
