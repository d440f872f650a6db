// Package docs checks the documentation as a reader meets it: the README stays a front door, its picture is the one
// its source renders, and every link between the documents leads to a file and a heading that are there.
package docs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const root = "../.."

// readmeMaxLines keeps the README a page a newcomer reads in five minutes; the rest lives under docs/, by reader.
const readmeMaxLines = 250

func TestTheReadmeIsAFrontDoor(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	lines := bytes.Count(raw, []byte("\n"))
	assert.LessOrEqual(t, lines, readmeMaxLines, "README.md has %d lines: move what one reader needs to its page under docs/", lines)
}

func TestTheArchitecturePictureIsRenderedFromItsSource(t *testing.T) {
	dot, err := exec.LookPath("dot")
	if err != nil && testing.Short() {
		t.Skip("graphviz's dot is not installed (Debian package graphviz; .ci/run installs it)")
	}
	require.NoError(t, err, "graphviz's dot renders docs/architecture.dot: install the Debian package graphviz")
	out, err := exec.Command(dot, "-Tsvg", filepath.Join(root, "docs", "architecture.dot")).Output()
	require.NoError(t, err)
	committed, err := os.ReadFile(filepath.Join(root, "docs", "architecture.svg"))
	require.NoError(t, err)
	assert.Equal(t, string(out), string(committed), "docs/architecture.svg is not what docs/architecture.dot renders: run `make docs`")
}

// A Markdown link's target: a path relative to its document, and a heading's anchor.
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestEveryLinkBetweenTheDocumentsLeadsSomewhere(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	docs = append(docs, filepath.Join(root, "README.md"))
	anchorsOf := map[string]map[string]bool{}
	checked := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range link.FindAllStringSubmatch(withoutCode(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.Join(filepath.Dir(doc), path)
			}
			checked++
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s links to %s, which is not there", rel(doc), target)
				continue
			}
			if anchor == "" {
				continue
			}
			if anchorsOf[file] == nil {
				anchorsOf[file] = anchors(t, file)
			}
			if !anchorsOf[file][anchor] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", rel(doc), target, rel(file))
			}
		}
	}
	assert.Greater(t, checked, 50, "the documents link to each other")
}

// anchors are the anchors GitHub gives a document's headings: lower case, punctuation but hyphens dropped, spaces as
// hyphens, a repeated one numbered.
func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(file)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, line := range strings.Split(withoutCode(string(raw)), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := strings.ToLower(heading)
		a = notInAnchor.ReplaceAllString(a, "")
		a = strings.ReplaceAll(a, " ", "-")
		unique := a
		for i := 1; out[unique]; i++ {
			unique = a + "-" + strconv.Itoa(i)
		}
		out[unique] = true
	}
	return out
}

var notInAnchor = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)

// withoutCode blanks fenced code blocks, whose lines are neither headings nor links.
func withoutCode(s string) string {
	var b strings.Builder
	fenced := false
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if !fenced {
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func rel(path string) string {
	r, err := filepath.Rel(root, path)
	if err != nil {
		return path
	}
	return r
}
