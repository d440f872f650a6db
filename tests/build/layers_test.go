package build_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The components are what users import: they stand below everything of internal/ (the environment layer, the
// programs of the local stack, the simulations, the test harnesses), so no component's code imports any of it; their
// tests may use the harnesses.
func TestNoComponentImportsInternal(t *testing.T) {
	const module = "github.com/gpu-tenancy/gpu-tenancy/"
	cmd := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./components/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	require.Greater(t, len(lines), 10, "the components are listed")
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, " ")
		for _, imp := range strings.Fields(imports) {
			assert.False(t, strings.HasPrefix(imp, module+"internal/"), "%s imports %s", pkg, imp)
		}
	}
}
