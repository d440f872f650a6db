// Command gpu-probe is the workload of the local stack's GPU pods: it prints the NVIDIA device nodes its container was
// given (only a claim's CDI edits add them), each GPU's UUID from the file those edits mount, and the NVIDIA variables,
// one line each, then sleeps until it is stopped, so a test reads what a pod sees from its log.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

func main() {
	var devices []string
	for _, pattern := range []string{"/dev/nvidia*", "/dev/nvidia-caps/*"} {
		found, _ := filepath.Glob(pattern)
		for _, d := range found {
			if info, err := os.Stat(d); err == nil && info.Mode()&os.ModeCharDevice != 0 {
				devices = append(devices, d)
			}
		}
	}
	sort.Strings(devices)
	if len(devices) == 0 {
		fmt.Println("devices: none")
	}
	for _, d := range devices {
		fmt.Println("device:", d)
	}
	// The local stack's stand-in for asking the driver (internal/sim/draplugin).
	uuids, _ := filepath.Glob("/run/nvidia-sim/*/uuid")
	sort.Strings(uuids)
	for _, f := range uuids {
		if uuid, err := os.ReadFile(f); err == nil {
			fmt.Println("uuid:", strings.TrimSpace(string(uuid)))
		}
	}
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		if strings.HasPrefix(kv, "NVIDIA_") {
			fmt.Println("env:", kv)
		}
	}
	if len(os.Args) > 1 && os.Args[1] == "-once" {
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
