package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
)

// changedFile is the project file a warm build sees changed (the Platform's wiring, a typical edit).
const changedFile = "components/platform/platform.go"

// floorDir is where the floor program seems to live. It exists only in the build's -overlay, so the checkout is
// never written and the floor builds with the project's own go.mod and go.sum.
const floorDir = "scripts/bench/sdkfloor"

// build is one program built cold then warm; files are overlay contents by path relative to the project.
type build struct {
	what, pkg, changed string
	files              map[string]string
}

// benchBuild builds the program (./infra, what `pulumi up` compiles) and the floor, each first with a fresh empty
// build cache (the module cache stays: nothing is downloaded) and then again with that cache after one file
// changed, and compares them.
func benchBuild(ctx context.Context, root string) ([]row, []string, error) {
	imports, err := sdkImports(ctx, root)
	if err != nil {
		return nil, nil, err
	}
	src := "// The SDK packages the project imports, and nothing else: the floor of its build.\npackage main\n\nimport (\n"
	for _, imp := range imports {
		src += "\t_ \"" + imp + "\"\n"
	}
	src += ")\n\nfunc main() {}\n"
	floorMain := filepath.Join(floorDir, "main.go")
	builds := []build{
		{what: "project (./infra)", pkg: "./infra", changed: changedFile},
		{what: fmt.Sprintf("SDK floor (%d packages)", len(imports)), pkg: "./" + floorDir, changed: floorMain,
			files: map[string]string{floorMain: src}},
	}
	dir, err := os.MkdirTemp("", "gpu-tenancy-bench-build-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)

	var cold, warm []row
	for _, b := range builds {
		cache, err := os.MkdirTemp(dir, "gocache-")
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(os.Stderr, "bench: cold build of %s\n", b.what)
		r, err := goBuild(ctx, root, dir, cache, b.pkg, b.files)
		if err != nil {
			return nil, nil, err
		}
		cold = append(cold, row{what: "build cold: " + b.what, size: "empty GOCACHE", wall: r.wall, rssKiB: r.rssKiB})

		// A comment appended: the file's content changes (Go's cache keys on content, not on mtime), its lines do not.
		files := maps.Clone(b.files)
		if files == nil {
			files = map[string]string{}
		}
		if _, ok := files[b.changed]; !ok {
			raw, err := os.ReadFile(filepath.Join(root, b.changed))
			if err != nil {
				return nil, nil, err
			}
			files[b.changed] = string(raw)
		}
		files[b.changed] += "\n// changed by scripts/bench for a warm build\n"
		fmt.Fprintf(os.Stderr, "bench: warm build of %s\n", b.what)
		if r, err = goBuild(ctx, root, dir, cache, b.pkg, files); err != nil {
			return nil, nil, err
		}
		warm = append(warm, row{what: "build warm: " + b.what, size: b.changed + " changed", wall: r.wall, rssKiB: r.rssKiB})
		// Each cold cache holds a few GB; only this build needs it.
		if err := os.RemoveAll(cache); err != nil {
			return nil, nil, err
		}
	}
	ratio := func(kind string, rows []row) string {
		project, floor := rows[0], rows[1]
		return fmt.Sprintf("build %s, project / SDK floor: wall x%.2f, peak RSS x%.2f", kind,
			project.wall.Seconds()/floor.wall.Seconds(), float64(project.rssKiB)/float64(floor.rssKiB))
	}
	return append(cold, warm...), []string{ratio("cold", cold), ratio("warm", warm)}, nil
}

// goBuild builds pkg with its own build cache and the overlay files, and measures the build.
func goBuild(ctx context.Context, root, dir, cache, pkg string, files map[string]string) (row, error) {
	overlay := map[string]string{}
	for path, content := range files {
		f, err := os.CreateTemp(dir, "overlay-*.go")
		if err != nil {
			return row{}, err
		}
		if _, err := f.WriteString(content); err != nil {
			f.Close()
			return row{}, err
		}
		if err := f.Close(); err != nil {
			return row{}, err
		}
		overlay[filepath.Join(root, path)] = f.Name()
	}
	spec, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		return row{}, err
	}
	specFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(specFile, spec, 0o600); err != nil {
		return row{}, err
	}
	// A binary already there whose build ID matches would skip the link; `pulumi up` builds to a new path each time.
	program := filepath.Join(dir, "program")
	if err := os.Remove(program); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return row{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-overlay", specFile, "-o", program, pkg)
	cmd.Dir, cmd.Env = root, append(os.Environ(), "GOCACHE="+cache)
	wall, rss, err := measure(cmd)
	return row{wall: wall, rssKiB: rss}, err
}

// sdkImports lists the packages the project's own packages in ./infra's build import directly from other modules
// (the standard library left out): the SDKs and libraries any program doing the same work must compile.
func sdkImports(ctx context.Context, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=ImportPath,Standard,Module,Imports", "./infra")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.Bytes())
	}
	type pkg struct {
		ImportPath string
		Standard   bool
		Module     *struct{ Main bool }
		Imports    []string
	}
	own := func(p pkg) bool { return p.Module != nil && p.Module.Main }
	deps := map[string]pkg{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		deps[p.ImportPath] = p
	}
	found := map[string]bool{}
	for _, p := range deps {
		if !own(p) {
			continue
		}
		for _, imp := range p.Imports {
			// "C" and the like are not packages of the list.
			if q, ok := deps[imp]; ok && !q.Standard && !own(q) {
				found[imp] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(found)), nil
}
