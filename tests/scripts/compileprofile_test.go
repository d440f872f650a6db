package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The profile records every package a cold build compiles and the link, and its summary counts a package that two
// builds compiled differently (here: once for the program, once with other flags) as compiled twice.
func TestTheCompileProfileRecordsEveryCompileOfARun(t *testing.T) {
	script, err := filepath.Abs("../../scripts/compile-profile.sh")
	require.NoError(t, err)
	mod := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte("module example.com/probe\n\ngo 1.24\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(mod, "greet"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "greet", "greet.go"), []byte("package greet\n\nfunc Hello() string { return \"hello\" }\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(mod, "main.go"),
		[]byte("package main\n\nimport \"example.com/probe/greet\"\n\nfunc main() { println(greet.Hello()) }\n"), 0o644))
	log := filepath.Join(t.TempDir(), "compiles.tsv")
	cache := t.TempDir()
	build := func(flags ...string) {
		cmd := exec.Command("go", append([]string{"build", "-o", filepath.Join(t.TempDir(), "probe")}, flags...)...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOCACHE="+cache, "GOFLAGS=-toolexec="+script, "GT_COMPILE_LOG="+log, "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	build()
	build("-gcflags=example.com/probe/greet=-N")

	raw, err := os.ReadFile(log)
	require.NoError(t, err)
	var greet, links int
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Split(line, "\t")
		require.Len(t, f, 4, line)
		if f[0] == "compile" && f[3] == "example.com/probe/greet" {
			greet++
		}
		if f[0] == "link" {
			links++
		}
	}
	assert.Equal(t, 2, greet, "greet compiled once per configuration")
	assert.Equal(t, 2, links)

	summary, err := exec.Command(script, "--summary", log).CombinedOutput()
	require.NoError(t, err, "%s", summary)
	assert.Regexp(t, `(?m)^ +2 +[0-9.]+ s +example\.com/probe/greet$`, string(summary))
	assert.Contains(t, string(summary), "(standard library)")
}
