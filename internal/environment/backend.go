package environment

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// project is what the environment needs of the project file, Pulumi.yaml.
type project struct {
	Name           string `json:"name"`
	StackConfigDir string `json:"stackConfigDir"`
	Backend        struct {
		URL string `json:"url"`
	} `json:"backend"`
}

// readProject reads root/Pulumi.yaml.
func readProject(root string) (project, error) {
	var p project
	raw, err := os.ReadFile(filepath.Join(root, "Pulumi.yaml"))
	if err != nil {
		return p, fmt.Errorf("environment: the project file: %w", err)
	}
	if err := yaml.Unmarshal(raw, &p); err != nil {
		return p, fmt.Errorf("environment: %s: %w", filepath.Join(root, "Pulumi.yaml"), err)
	}
	if p.Name != projectName {
		return p, fmt.Errorf("environment: %s is project %q, not %s", filepath.Join(root, "Pulumi.yaml"), p.Name, projectName)
	}
	return p, nil
}

// BackendEnv is the variable that names the state backend, as the pulumi CLI reads it.
const BackendEnv = "PULUMI_BACKEND_URL"

// resolveBackend is the state backend the environment runs on, as the pulumi CLI chooses it (pulumi pkg v3.274.1
// workspace/creds.go GetCurrentCloudURLWithSource): given, else $PULUMI_BACKEND_URL, else the project's backend.url.
// A stored login is not used: an environment's stacks are always on the backend its project or its caller names, the
// same for every stack, every run and every CI job. A file URL is made absolute (against root, the project's directory)
// and asks for no metadata sidecars (statefiles.go).
func resolveBackend(given string, p project, root string) (string, error) {
	b := given
	if b == "" {
		b = os.Getenv(BackendEnv)
	}
	if b == "" {
		b = p.Backend.URL
	}
	if b == "" {
		return "", fmt.Errorf("environment: no state backend: set %s (file://<dir>, gs://<bucket>, s3://<bucket>, "+
			"https://api.pulumi.com) or backend.url in %s", BackendEnv, filepath.Join(root, "Pulumi.yaml"))
	}
	if !strings.HasPrefix(b, "file://") {
		return b, nil
	}
	u, err := url.Parse(b)
	if err != nil {
		return "", fmt.Errorf("environment: backend %s: %w", b, err)
	}
	dir := strings.TrimPrefix(b, "file://")
	if i := strings.IndexByte(dir, '?'); i >= 0 {
		dir = dir[:i]
	}
	if strings.HasPrefix(dir, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, dir[2:])
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	q := u.Query()
	if !q.Has("metadata") {
		q.Set("metadata", "skip")
	}
	return "file://" + filepath.Clean(dir) + "?" + q.Encode(), nil
}

// fileStateDir is the directory of a file backend's URL, and false for any other backend.
func fileStateDir(backend string) (string, bool) {
	dir, ok := strings.CutPrefix(backend, "file://")
	if !ok {
		return "", false
	}
	if i := strings.IndexByte(dir, '?'); i >= 0 {
		dir = dir[:i]
	}
	return dir, true
}

// LocalBackend is the file backend of the local stack under repoRoot, as `make demo` and `make up` use it.
func LocalBackend(repoRoot string) string {
	return "file://" + filepath.Join(repoRoot, ".tools", "state") + "?" + metadataSkip
}

// isUnder reports whether path is dir or inside it.
func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
