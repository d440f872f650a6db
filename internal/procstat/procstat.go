// Package procstat reads what /proc/<pid>/stat says of a process (proc(5)), for the few places that must tell a
// process that runs from one that has stopped, and a process from another that took its pid.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Stat is what this project reads of a process.
type Stat struct {
	// State is the one-letter state: R running, S sleeping, Z zombie (exited, not yet collected by its parent), ...
	State string
	// PPid is the parent's pid.
	PPid int
	// Start is the start time in clock ticks after boot: with the pid, it names one process.
	Start string
}

// Read returns the stat of pid, and false when there is no such process or no /proc.
func Read(pid int) (Stat, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, false
	}
	// Field 2, the command name, is parenthesised and may itself hold spaces and parentheses: the fields that follow
	// start after the last ')'. They are fields 3 (state), 4 (ppid) ... 22 (starttime).
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return Stat{}, false
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return Stat{}, false
	}
	return Stat{State: fields[0], PPid: ppid, Start: fields[19]}, true
}
