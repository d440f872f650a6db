package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"github.com/gpu-tenancy/gpu-tenancy/internal/environment/envcmd"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport"
	"github.com/gpu-tenancy/gpu-tenancy/internal/gpureport/cli"
	"github.com/gpu-tenancy/gpu-tenancy/internal/testutil/toolbin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// A fenced block of a document, and what its fence says it is. Every block says, after its language, one of:
//
//	file=PATH[#REGION]  the block is that file (PATH relative to the document), or the region of it between the lines
//	                    "docs:begin REGION" and "docs:end REGION"; the file is compiled or run by its own tests
//	schema              TypeScript or Python that cannot run here: each property it names is one of provider/schema.json
//	commands            command lines: make targets, the gpu-tenancy command line and pulumi, each flag checked against
//	                    its help
//	config              stack config: each gpu-tenancy: key is one the Platform decodes, and the whole decodes
//	resources           a container's resources, as a tenant writes them: decoded as Kubernetes' own type, strictly
//	report=KIND         a CLI report as -o json prints it: decoded strictly into the report type
//	usage               the CLI's usage lines: each command and flag checked against its help
//	output              what a command printed, shown as an example: not code or config, so not run
//	diagram             a picture drawn in text
type block struct {
	doc, lang, kind, arg string
	line                 int
	text                 string
}

var fence = regexp.MustCompile("^(\\s*)```(.*)$")

func blocks(t *testing.T) []block {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	var out []block
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		var cur *block
		var indent string
		for i, line := range strings.Split(string(raw), "\n") {
			m := fence.FindStringSubmatch(line)
			switch {
			case m != nil && cur == nil:
				indent = m[1]
				words := strings.Fields(m[2])
				cur = &block{doc: doc, line: i + 1}
				if len(words) > 0 {
					cur.lang = words[0]
				}
				if len(words) > 1 {
					cur.kind, cur.arg, _ = strings.Cut(words[1], "=")
				}
			case m != nil && strings.TrimSpace(m[2]) == "":
				out = append(out, *cur)
				cur = nil
			case cur != nil:
				cur.text += strings.TrimPrefix(line, indent) + "\n"
			}
		}
		require.Nil(t, cur, "%s: a block is not closed", rel(doc))
	}
	return out
}

func (b block) String() string { return fmt.Sprintf("%s:%d", rel(b.doc), b.line) }

func TestEveryBlockInTheDocsIsChecked(t *testing.T) {
	kinds := map[string]func(*testing.T, block){
		"file": checkFile, "schema": checkSchemaNames, "commands": checkCommands, "config": checkConfig,
		"resources": checkResources, "report": checkReport, "usage": checkUsage,
		"output": func(*testing.T, block) {}, "diagram": func(*testing.T, block) {},
	}
	all := blocks(t)
	require.Greater(t, len(all), 30)
	for _, b := range all {
		t.Run(b.String(), func(t *testing.T) {
			check, ok := kinds[b.kind]
			require.True(t, ok, "%s: the fence says %q %q: say what the block is after its language (```%s file=PATH, schema, commands, "+
				"config, resources, report=KIND, usage, output or diagram; tests/docs/snippets_test.go)", b, b.lang, b.kind, b.lang)
			check(t, b)
		})
	}
}

// checkFile: the block is the file, or its region, as it stands.
func checkFile(t *testing.T, b block) {
	path, region, _ := strings.Cut(b.arg, "#")
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(b.doc), path))
	require.NoError(t, err, "%s includes %s", b, b.arg)
	want := string(raw)
	if region != "" {
		begin, end := "docs:begin "+region+"\n", "docs:end "+region
		i := strings.Index(want, begin)
		require.GreaterOrEqual(t, i, 0, "%s has no line ending in %q", path, strings.TrimSpace(begin))
		want = want[i+len(begin):]
		j := strings.Index(want, end)
		require.GreaterOrEqual(t, j, 0, "%s has no line ending in %q", path, end)
		want = want[:strings.LastIndex(want[:j], "\n")+1]
	}
	assert.Equal(t, want, b.text, "%s differs from %s: copy the file's text into the document", b, b.arg)
}

// schemaNames are every property name of provider/schema.json's resources and types, inputs and outputs.
func schemaNames(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "provider", "schema.json"))
	require.NoError(t, err)
	var spec struct {
		Resources map[string]struct {
			InputProperties, Properties map[string]json.RawMessage
		}
		Types map[string]struct{ Properties map[string]json.RawMessage }
	}
	require.NoError(t, json.Unmarshal(raw, &spec))
	names := map[string]bool{}
	for _, r := range spec.Resources {
		for n := range r.InputProperties {
			names[n] = true
		}
		for n := range r.Properties {
			names[n] = true
		}
	}
	for _, ty := range spec.Types {
		for n := range ty.Properties {
			names[n] = true
		}
	}
	return names
}

var (
	quoted      = regexp.MustCompile(`"[^"]*"`)
	tsKey       = regexp.MustCompile(`([A-Za-z_]\w*)\s*:`)
	pyKwarg     = regexp.MustCompile(`\b([a-z_]\w*)=`)
	pyDictKey   = regexp.MustCompile(`"([a-z_][a-z0-9_]*)"\s*:`)
	member      = regexp.MustCompile(`\bgpus\.(\w+)`)
	snakeToWord = regexp.MustCompile(`_([a-z0-9])`)
)

// checkSchemaNames: each property a TypeScript or Python snippet names is one of the schema's (Python's in snake
// case), and so is each output it reads.
func checkSchemaNames(t *testing.T, b block) {
	names := schemaNames(t)
	var used []string
	switch b.lang {
	case "ts":
		for _, m := range tsKey.FindAllStringSubmatch(quoted.ReplaceAllString(b.text, `""`), -1) {
			used = append(used, m[1])
		}
	case "python":
		for _, m := range pyKwarg.FindAllStringSubmatch(b.text, -1) {
			used = append(used, m[1])
		}
		for _, m := range pyDictKey.FindAllStringSubmatch(b.text, -1) {
			used = append(used, m[1])
		}
	default:
		t.Fatalf("%s: schema names are checked in ts and python blocks, not %q", b, b.lang)
	}
	for _, m := range member.FindAllStringSubmatch(b.text, -1) {
		used = append(used, m[1])
	}
	require.NotEmpty(t, used, "%s names no property", b)
	for _, u := range used {
		camel := snakeToWord.ReplaceAllStringFunc(u, func(s string) string { return strings.ToUpper(s[1:]) })
		assert.True(t, names[camel], "%s names %s, which provider/schema.json does not have", b, u)
	}
}

// checkConfig: the block is stack config, set over the local stack's: every key is one the Platform reads, and the
// whole loads as a stack's config does, validated.
func checkConfig(t *testing.T, b block) {
	var doc map[string]any
	require.NoError(t, yaml.UnmarshalStrict([]byte(b.text), &doc), "%s", b)
	if c, ok := doc["config"].(map[string]any); ok {
		doc = c
	}
	require.NotEmpty(t, doc, "%s holds no key", b)
	sc, err := platform.ReadStackFile(filepath.Join(root, "stacks", "Pulumi.local.yaml"))
	require.NoError(t, err)
	for key, v := range doc {
		require.True(t, strings.HasPrefix(key, platform.ConfigNamespace+":"), "%s: %s is not a %s: key", b, key, platform.ConfigNamespace)
		raw, err := json.Marshal(v)
		require.NoError(t, err)
		sc.Values[key] = string(raw)
	}
	_, err = platform.Load(sc.Source(), platform.ConfigKeys)
	assert.NoError(t, err, "%s, set over the local stack's config", b)
}

// checkResources: a container's resources, as Kubernetes decodes them, strictly.
func checkResources(t *testing.T, b block) {
	var doc struct {
		Resources corev1.ResourceRequirements `json:"resources"`
	}
	require.NoError(t, yaml.UnmarshalStrict([]byte(b.text), &doc), "%s", b)
	assert.NotEmpty(t, doc.Resources.Limits, "%s sets no limit", b)
}

// checkReport: a report as the CLI prints it, decoded strictly into its type.
func checkReport(t *testing.T, b block) {
	reports := map[string]any{"CapacityReport": &gpureport.CapacityReport{}, "PendingReport": &gpureport.PendingReport{},
		"AuditReport": &gpureport.AuditReport{}}
	report, ok := reports[b.arg]
	require.True(t, ok, "%s: no report kind %q", b, b.arg)
	dec := json.NewDecoder(strings.NewReader(b.text))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(report), "%s is not a %s as the CLI writes it", b, b.arg)
	var kind struct{ Kind string }
	require.NoError(t, json.Unmarshal([]byte(b.text), &kind))
	assert.Equal(t, b.arg, kind.Kind)
}

// cliHelp is `gpu-tenancy <command> --help`, run in-process.
func cliHelp(t *testing.T, command string) string {
	t.Helper()
	var out bytes.Buffer
	args := []string{"--help"}
	if command != "" {
		args = []string{command, "--help"}
	}
	app := cli.New(&out, &out)
	app.Commands = envcmd.Commands(io.Discard, io.Discard)
	code := app.Run(context.Background(), args)
	require.Zero(t, code, "gpu-tenancy %s --help: %s", command, out.String())
	return out.String()
}

// makeRule is a rule's line of a Makefile: its targets.
var makeRule = regexp.MustCompile(`(?m)^([a-z][a-z0-9 -]*):`)

var longFlag = regexp.MustCompile(`(?:^|\s)(--?[a-z][a-z-]*)`)

// checkCLI checks one command line of the gpu-tenancy CLI: its command is one of its commands, each flag one of
// that command's.
func checkCLI(t *testing.T, b block, args []string) {
	t.Helper()
	require.NotEmpty(t, args, "%s: gpu-tenancy with no command", b)
	command := args[0]
	require.Regexp(t, "(?m)^  "+regexp.QuoteMeta(command)+" ", cliHelp(t, ""), "%s: gpu-tenancy has no command %s", b, command)
	help := cliHelp(t, command)
	for _, m := range longFlag.FindAllStringSubmatch(strings.Join(args[1:], " "), -1) {
		assert.Contains(t, help, " "+m[1], "%s: gpu-tenancy %s has no flag %s", b, command, m[1])
	}
}

// checkUsage: the CLI's usage lines, each command and flag one it has.
func checkUsage(t *testing.T, b block) {
	for _, line := range strings.Split(strings.TrimSpace(b.text), "\n") {
		words := strings.Fields(line)
		require.Equal(t, "gpu-tenancy", words[0], "%s", b)
		for _, command := range strings.Split(words[1], "|") {
			checkCLI(t, b, append([]string{command}, words[2:]...))
		}
	}
}

// The commands a block may hold besides the project's own, which are the shell's or the host's: their lines are not
// checked.
var shellCommands = []string{"cp", "ln", "chmod", "printf", "kubectl", "go"}

// checkCommands: each line is a command line; make targets, the project's CLIs and pulumi are checked against what
// they take.
func checkCommands(t *testing.T, b block) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	targets := map[string]bool{}
	for _, m := range makeRule.FindAllStringSubmatch(string(makefile), -1) {
		for _, target := range strings.Fields(m[1]) {
			targets[target] = true
		}
	}
	for _, line := range strings.Split(b.text, "\n") {
		line, _, _ = strings.Cut(line, " #")
		words := strings.Fields(line)
		if len(words) == 0 || strings.HasPrefix(words[0], "#") {
			continue
		}
		switch name := filepath.Base(words[0]); {
		case name == "make":
			for _, w := range words[1:] {
				if !strings.Contains(w, "=") {
					assert.True(t, targets[w], "%s: make has no target %s", b, w)
				}
			}
		case name == "gpu-tenancy":
			checkCLI(t, b, words[1:])
		case name == "kubectl" && len(words) > 1 && words[1] == "gpu-tenancy":
			checkCLI(t, b, words[2:])
		case name == "go" && len(words) > 2 && words[1] == "run":
			_, err := os.Stat(filepath.Join(root, words[2]))
			assert.NoError(t, err, "%s: go run %s: no such package", b, words[2])
			if words[2] == "./cmd/gpu-tenancy" {
				checkCLI(t, b, words[3:])
			}
		case name == "pulumi":
			checkPulumi(t, b, words[1:])
		default:
			assert.Contains(t, shellCommands, name, "%s: %s is not a command this test knows: check it here", b, name)
		}
	}
}

// checkPulumi: the pulumi subcommand exists and takes each flag, as the pulumi CLI that make tools builds says.
func checkPulumi(t *testing.T, b block, args []string) {
	t.Helper()
	bin, err := toolbin.Path("pulumi")
	if err != nil && testing.Short() {
		t.Skip(err)
	}
	require.NoError(t, err)
	var command []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.Contains(a, "<") {
			break
		}
		command = append(command, a)
	}
	for len(command) > 0 {
		// The subcommand is as many words as the CLI knows; the rest are its arguments.
		help, err := exec.Command(bin, append(slices.Clone(command), "--help")...).CombinedOutput()
		if err == nil && strings.Contains(string(help), "pulumi "+strings.Join(command, " ")) {
			for _, a := range args[len(command):] {
				if strings.HasPrefix(a, "--") {
					assert.Contains(t, string(help), strings.SplitN(a, "=", 2)[0], "%s: pulumi %s has no flag %s", b, strings.Join(command, " "), a)
				}
			}
			return
		}
		command = command[:len(command)-1]
	}
	t.Errorf("%s: pulumi has no command %s", b, strings.Join(args, " "))
}
