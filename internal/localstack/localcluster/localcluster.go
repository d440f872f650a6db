// Package localcluster runs scripts/local-cluster.sh, the local control plane that the end-to-end tests and the
// benchmark start for themselves.
package localcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// Tools are what a control plane of scripts/local-cluster.sh, and the engine on it, need in .tools/bin: `make tools`
// builds them.
var Tools = []string{"pulumi", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// MissingTool names the first of Tools that is not built under root, or "" when all are.
func MissingTool(root string) string {
	for _, tool := range Tools {
		if _, err := os.Stat(filepath.Join(root, ".tools", "bin", tool)); err != nil {
			return tool
		}
	}
	return ""
}

// Run runs `scripts/local-cluster.sh verb` under root with the environment env (its ports, GT_*_PORT) and the data
// directory dir (GT_CLUSTER_DIR), its output to out.
func Run(ctx context.Context, root, dir, verb string, env []string, out io.Writer) error {
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "local-cluster.sh"), verb)
	cmd.Env = append(env, "GT_CLUSTER_DIR="+dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("local-cluster.sh %s: %w", verb, err)
	}
	return nil
}
