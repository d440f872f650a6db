package environment

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The file state backend stores each object through gocloud.dev/blob/fileblob (v0.46, the version the pulumi CLI
// v3.274.1 is built with, blob/fileblob/fileblob.go and attrs.go). An object is written to "<key>.<hex>.tmp" beside
// it and renamed into place, which a killed engine cannot leave half-done; but its metadata sidecar "<key>.attrs" is
// truncated, then written, in place. An engine killed between the two leaves an empty sidecar, and from then on every
// read of the object fails ("failed to load checkpoint: EOF"): the stack can no longer even be selected. The backend
// URL therefore asks for no sidecars (metadataSkip), and repairState removes the debris that earlier runs, or a
// kill inside a rename, may have left.
const (
	// metadataSkip is fileblob's URL option for writing no sidecars; the backend needs none of what they hold
	// (content type, MD5).
	metadataSkip = "metadata=skip"
	sidecarExt   = ".attrs"
	tempExt      = ".tmp"
	// tempAge is how old a temporary file must be to be debris: a live writer renames its file within milliseconds,
	// and an engine running now on the same state must not lose the file it is about to rename.
	tempAge = time.Minute
)

// repairState removes, under the state directory's .pulumi, sidecars that do not decode and temporary files older
// than tempAge, and says what it removed and why. Nothing it removes holds state: a sidecar holds metadata, and a
// temporary file never became the object it was written for. A temporary lock file would otherwise count as a lock
// that nothing can read, and lock the stack for good.
func repairState(stateDir string, now time.Time) ([]string, error) {
	root := filepath.Join(stateDir, ".pulumi")
	var removed []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return fs.SkipAll
		}
		if err != nil || d.IsDir() {
			return err
		}
		var why string
		switch {
		case strings.HasSuffix(path, sidecarExt):
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if json.Valid(raw) {
				return nil
			}
			why = "a metadata sidecar left incomplete by an engine that was killed while writing it; it holds no state"
		case strings.HasSuffix(path, tempExt):
			info, err := d.Info()
			if err != nil {
				return err
			}
			if now.Sub(info.ModTime()) < tempAge {
				return nil
			}
			why = "a temporary file left by an engine that was killed before renaming it into place; it holds no state"
		default:
			return nil
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		removed = append(removed, fmt.Sprintf("removed %s: %s", path, why))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine: repairing the state in %s: %w", stateDir, err)
	}
	return removed, nil
}
