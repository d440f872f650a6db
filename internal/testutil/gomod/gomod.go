// Package gomod finds where a Go module version lives in the local module cache, downloading it through the
// module proxy when needed, without adding it to the project's go.mod. Tests and the end-to-end driver use it to
// reach files that ship inside Go modules (the vCluster chart and its values schema).
package gomod

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// download is the part of `go mod download -json` output this package reads.
type download struct {
	Dir   string
	Error string
}

// Dir returns the module cache directory of modulePath at version, downloading it first if it is not cached.
func Dir(modulePath, version string) (string, error) {
	if modulePath == "" || version == "" {
		return "", errors.New("gomod: module path and version are both required")
	}
	ref := modulePath + "@" + version
	// An empty working directory keeps the command outside any module, so it can never touch a go.mod or go.sum.
	work, err := os.MkdirTemp("", "gomod-")
	if err != nil {
		return "", fmt.Errorf("locating %s: %w", ref, err)
	}
	defer os.RemoveAll(work)

	cmd := exec.Command("go", "mod", "download", "-json", ref)
	cmd.Dir = work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()

	// With -json, go reports a module's own failure in the JSON Error field (and exits non-zero); read that first.
	var d download
	if stdout.Len() > 0 {
		if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
			return "", fmt.Errorf("locating %s: reading go mod download output: %w", ref, err)
		}
	}
	switch {
	case d.Error != "":
		return "", fmt.Errorf("locating %s: %s", ref, d.Error)
	case runErr != nil:
		return "", fmt.Errorf("locating %s: go mod download: %w: %s", ref, runErr, strings.TrimSpace(stderr.String()))
	case d.Dir == "":
		return "", fmt.Errorf("locating %s: go mod download reported no directory", ref)
	}
	return d.Dir, nil
}
