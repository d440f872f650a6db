package environment

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A destroy of the whole environment is recorded until it is done, so recover runs it again on every stack; nothing
// else is recorded for the environment, so each stack then recovers only what it left unfinished itself.
func TestTheEnvironmentsDestroyIsRecordedUntilDone(t *testing.T) {
	e := &Environment{Stacks: []*Stack{{opts: Options{WorkDir: t.TempDir()}}}}
	assert.Equal(t, Op(""), e.interrupted(), "nothing under way")
	done, err := e.begin(OpDestroy)
	require.NoError(t, err)
	assert.Equal(t, OpDestroy, e.interrupted(), "a killed destroy leaves its record")
	done()
	assert.Equal(t, Op(""), e.interrupted(), "a finished one does not")
}
