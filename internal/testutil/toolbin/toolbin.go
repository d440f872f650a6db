// Package toolbin finds the tools scripts/build-tools.sh builds into .tools/bin from the tool modules under
// scripts/tools, for the tests that run them.
package toolbin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const module = "module github.com/gpu-tenancy/gpu-tenancy"

// Path is the path of a tool built by scripts/build-tools.sh: under $GT_TOOLS_DIR/bin when set, as the script does,
// else under .tools/bin of the repository holding the working directory.
func Path(name string) (string, error) {
	dir := os.Getenv("GT_TOOLS_DIR")
	if dir == "" {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, ".tools")
	}
	p := filepath.Join(dir, "bin", name)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is not built: run `make tools` (scripts/build-tools.sh): %w", name, err)
	}
	return p, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(mod), module+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the gpu-tenancy repository: no go.mod of " + strings.TrimPrefix(module, "module "))
		}
		dir = parent
	}
}
