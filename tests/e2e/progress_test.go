package e2e

import (
	"io"
	"strings"
	"sync"
	"testing"
)

// tailLines is how much of the engine's output a failed test shows when not run with -v.
const tailLines = 60

// progressTo is where a test sends what the engine and the demo print. With -v it streams into the test's log.
// Otherwise a failed test shows only the last lines, after its failures: one refreshing preview prints thousands of
// lines of diffs, and a report that shows the head of a failed test's output must show the assertion that failed.
func progressTo(t *testing.T) io.Writer {
	if testing.Verbose() {
		return testWriter{t}
	}
	w, loaded := tails.LoadOrStore(t, &tail{})
	if !loaded {
		t.Cleanup(func() {
			tails.Delete(t)
			if t.Failed() {
				t.Logf("the last %d lines the engine printed:\n%s", tailLines, w.(*tail).String())
			}
		})
	}
	return w.(*tail)
}

// tails holds one tail per test that sent progress to it.
var tails sync.Map

// tail keeps the last tailLines lines written to it.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (w *tail) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	if extra := len(w.lines) - tailLines; extra > 0 {
		w.lines = append(w.lines[:0], w.lines[extra:]...)
	}
	return len(p), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.lines, "\n")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
