// Command gpu-probe is the workload of the local stack's GPU pods: it prints the device nodes its container was given
// (the NVIDIA ones, which only a claim's CDI edits add) and the NVIDIA variables those edits set, one line each, then
// sleeps until it is stopped, so a test reads what a pod sees from its log.
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
	devices, _ := filepath.Glob("/dev/nvidia*")
	sort.Strings(devices)
	if len(devices) == 0 {
		fmt.Println("devices: none")
	}
	for _, d := range devices {
		fmt.Println("device:", d)
	}
	env := os.Environ()
	sort.Strings(env)
	for _, kv := range env {
		if strings.HasPrefix(kv, "NVIDIA_") || strings.HasPrefix(kv, "GPU_") {
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
