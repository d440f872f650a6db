package environment

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/gpu-tenancy/gpu-tenancy/components/platform"
	"sigs.k8s.io/yaml"
)

// appliedRecord is the file in a stack's work directory that holds the fingerprint of its last successful up
// through Environment.Up: what that up applied. Every operation clears it first (begin), so a run that fails or is
// killed, a destroy, a recovery or an up outside the environment leaves no record, and the next up runs the stack.
const appliedRecord = "applied"

// programHash is the hash of this executable, which is the inline program: a change of the code is a change of
// what an up applies.
var programHash = sync.OnceValues(func() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	f, err := os.Open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
})

// partConfig is the config the stack's part builds from: the decoded args with defaults applied (so that the same
// config spelt another way is the same), for a group's stack with only the tenants that are its own, so that a change
// of a tenant changes the config of its group's stack (and the platform's, which grants every tenant its classes)
// only; and the secrets, which the args hold as placeholders: the stack file's ciphertexts and the secret config.
// A tenant's group is the one its entry records, else the group whose stack holds it (held, from the stacks' states:
// where its namespace lives), else its hash for a tenant no stack holds. With held nil (not read yet), a tenant
// without a recorded group may be any group's, so it counts in every group's config.
func partConfig(o Options, stackFile string, args *platform.PlatformArgs, held map[string]int) (map[string]any, error) {
	raw, err := os.ReadFile(stackFile)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Config map[string]any `json:"config"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("reading %s: %w", stackFile, err)
	}
	secure := map[string]any{}
	for k, v := range doc.Config {
		if m, ok := v.(map[string]any); ok && m["secure"] != nil {
			secure[k] = m["secure"]
		}
	}
	part := args.WithDefaults()
	if g, isGroup := platform.PartOf(o.Stack, args.TenantGroups).Group(); isGroup {
		part.Tenants = slices.DeleteFunc(slices.Clone(args.Tenants), func(t platform.TenantArgs) bool {
			switch h, isHeld := held[t.Name]; {
			case t.Group != nil:
				return *t.Group != g
			case held == nil:
				return false
			case isHeld:
				return h != g
			default:
				return platform.TenantGroup(t.Name, args.TenantGroups) != g
			}
		})
	}
	return map[string]any{"args": part, "secure": secure, "secrets": o.SecretConfig}, nil
}

// fingerprint is what an up of the stack applies: the program, the stack, its part's config and upstream (for a
// group's stack, the platform stack's kubeconfig output, the cluster it reaches).
func (s *Stack) fingerprint(upstream string) (string, error) {
	program, err := programHash()
	if err != nil {
		return "", fmt.Errorf("engine: hashing the program: %w", err)
	}
	doc, err := json.Marshal(map[string]any{"program": program, "stack": s.opts.Stack, "config": s.partConfig,
		"upstream": upstream})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:]), nil
}

// unchanged says whether the stack's last up through the environment applied what an up would apply now.
func (s *Stack) unchanged(upstream string) bool {
	want, err := s.fingerprint(upstream)
	if err != nil {
		return false
	}
	got, err := os.ReadFile(filepath.Join(s.opts.WorkDir, appliedRecord))
	return err == nil && string(got) == want
}

// recordApplied records what the up that just succeeded applied.
func (s *Stack) recordApplied(upstream string) error {
	fp, err := s.fingerprint(upstream)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.opts.WorkDir, appliedRecord), []byte(fp), 0o600); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return nil
}
