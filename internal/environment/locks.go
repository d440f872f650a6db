package environment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gpu-tenancy/gpu-tenancy/internal/procstat"
)

// lockFile is what the file state backend writes while an operation holds a stack (pulumi/pulumi
// pkg/backend/diy/lock.go, lockContent, v3.274.1). A lock outlives an engine that was killed.
type lockFile struct {
	Pid       int       `json:"pid"`
	Username  string    `json:"username"`
	Hostname  string    `json:"hostname"`
	Timestamp time.Time `json:"timestamp"`
}

// Locks lists this stack's lock files on a file backend: <state>/.pulumi/locks/<org>/<project>/<stack>/<id>.json. Other
// backends keep their locks where this program does not read them: none.
func (s *Stack) Locks() ([]string, error) {
	dir, ok := fileStateDir(s.opts.Backend)
	if !ok {
		return nil, nil
	}
	root := filepath.Join(dir, ".pulumi", "locks")
	var locks []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return fs.SkipAll
		}
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if !d.IsDir() && strings.HasSuffix(path, ".json") && filepath.Base(dir) == s.opts.Stack &&
			filepath.Base(filepath.Dir(dir)) == projectName {
			locks = append(locks, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the locks of stack %s: %w", s.opts.Stack, err)
	}
	return locks, nil
}

// ReleaseStaleLocks removes the locks of pulumi processes of this host that no longer run, saying whose each was. The
// lock of a process that still runs, or of another host (which this host cannot check), is an error that says whose
// it is and what to do.
func (s *Stack) ReleaseStaleLocks() error {
	locks, err := s.Locks()
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	for _, path := range locks {
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var l lockFile
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("lock %s is unreadable (%v): delete it once no operation runs", path, err)
		}
		who := fmt.Sprintf("pulumi process %d of %s on %s, since %s", l.Pid, l.Username, l.Hostname, l.Timestamp.Format(time.RFC3339))
		switch {
		case l.Hostname != host:
			return fmt.Errorf("stack %s is locked by %s, another host: this host cannot tell whether it still runs; "+
				"once it has stopped, delete %s", s.opts.Stack, who, path)
		case processRuns(l.Pid):
			return fmt.Errorf("stack %s is locked by %s, which still runs: wait for it, or stop it (kill %d) and try again",
				s.opts.Stack, who, l.Pid)
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		s.say("released the lock of %s, which no longer runs", who)
	}
	return nil
}

// processRuns reports whether a process of this host runs: it exists (signal 0 checks without sending anything) and
// is not a zombie. A pulumi CLI killed with its parent stays a zombie until its new parent collects it, which some
// init processes do late; it has stopped all the same.
func processRuns(pid int) bool {
	if pid <= 0 {
		return false
	}
	if st, ok := procstat.Read(pid); ok && st.State == "Z" {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
