package nodes

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// compiledIn are the host paths the kubelet, containerd, its shims and libcni use whatever their flags say, and where
// the CNI and CDI look by default; the nodes bind their own over them inside their mount namespaces.
var compiledIn = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/run/containerd",
	"/var/lib/containerd", "/etc/cni", "/opt/cni", "/run/cdi", "/etc/cdi", "/run/netns"}

// counters are iptables-save's packet and byte counts, which change by themselves.
var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// nodeParts are the programs a node runs (scripts/local-nodes.sh).
var nodeParts = []string{"kubelet", "kube-proxy", "kube-router", "containerd", "containerd-shim-runc-v2", "ctr", "pause", "gpu-probe",
	"sim-dra-plugin"}

// hostState is what real nodes could leave behind on the host, by kind: processes of the nodes and of the control plane
// in dir (other tests' control planes come and go meanwhile), network interfaces, routes, iptables rules and chains (both
// families, every table), ipsets, mounts, cgroups, kernel settings and files under the compiled-in paths.
func hostState(t *testing.T, root, dir string) map[string][]string {
	t.Helper()
	tools, err := filepath.EvalSymlinks(filepath.Join(root, ".tools"))
	require.NoError(t, err)
	state := map[string][]string{}
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, p := range procs {
		exe, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(exe, tools+"/") {
			continue
		}
		exe = strings.TrimSuffix(exe, " (deleted)")
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if slices.Contains(nodeParts, filepath.Base(exe)) || strings.Contains(string(cmdline), dir) {
			state["processes"] = append(state["processes"], exe+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	for _, line := range lines(t, "ip", "-o", "link", "show") {
		// "3: name@peer: <FLAGS> ...": the name, without the index, which grows.
		if _, rest, ok := strings.Cut(line, ": "); ok {
			name, _, _ := strings.Cut(rest, ":")
			state["interfaces"] = append(state["interfaces"], name)
		}
	}
	state["routes"] = append(lines(t, "ip", "-4", "route", "show", "table", "all"),
		lines(t, "ip", "-6", "route", "show", "table", "all")...)
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		for _, line := range lines(t, save) {
			if !strings.HasPrefix(line, "#") {
				state["iptables"] = append(state["iptables"], save+" "+counters.ReplaceAllString(line, ""))
			}
		}
	}
	// The enforcer's ipsets live in each node's namespace; none may reach the host's.
	for _, set := range lines(t, "ipset", "list", "-n") {
		if set != "" {
			state["ipsets"] = append(state["ipsets"], set)
		}
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(mountinfo)), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			state["mounts"] = append(state["mounts"], f[4])
		}
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/*")
	for _, d := range hierarchies {
		if info, err := os.Stat(d); err == nil && info.IsDir() {
			state["cgroups"] = append(state["cgroups"], d)
		}
	}
	for _, dir := range []string{"/proc/sys/kernel", "/proc/sys/vm", "/proc/sys/net/ipv4", "/proc/sys/net/bridge",
		"/proc/sys/net/netfilter"} {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || path == "/proc/sys/kernel/ns_last_pid" {
				return nil
			}
			if info, err := d.Info(); err != nil || info.Mode().Perm()&0o200 == 0 {
				return nil
			}
			if v, err := os.ReadFile(path); err == nil {
				state["sysctls"] = append(state["sysctls"], path+"="+strings.TrimSpace(string(v)))
			}
			return nil
		})
	}
	for _, dir := range compiledIn {
		_ = filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
			if err == nil {
				state["compiled-in paths"] = append(state["compiled-in paths"], path)
			}
			return nil
		})
	}
	for k := range state {
		slices.Sort(state[k])
	}
	return state
}

func lines(t *testing.T, name string, args ...string) []string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	require.NoError(t, err, "%s %v", name, args)
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// The comparison after down can fail: each kind of leftover a node could leave shows in hostState.
func TestHostStateSeesWhatANodeLeavesBehind(t *testing.T) {
	root := asRoot(t, "changes the host for a moment")
	dir, mnt := t.TempDir(), t.TempDir()
	leftovers := []struct {
		section      string
		make, remove []string
	}{
		{"interfaces", []string{"ip", "link", "add", "gtleft0", "type", "bridge"}, []string{"ip", "link", "del", "gtleft0"}},
		{"routes", []string{"ip", "route", "add", "blackhole", "10.249.99.0/24"}, []string{"ip", "route", "del", "blackhole", "10.249.99.0/24"}},
		// A node's part left running: the holder's program, in a session of its own as the script starts it.
		{"processes", []string{"sh", "-c", "setsid " + filepath.Join(root, ".tools", "nodeimages", "pause") + " </dev/null >/dev/null 2>&1 & echo $! >" + dir + "/pid; sleep 0.5"},
			[]string{"sh", "-c", "kill $(cat " + dir + "/pid); sleep 0.5"}},
		// iptables-nft creates the table on first use: it goes too, if it was not there before.
		{"iptables", []string{"sh", "-c", "nft list table ip nat >/dev/null 2>&1 || touch " + dir + "/nat; iptables -t nat -N KUBE-LEFTOVER"},
			[]string{"sh", "-c", "iptables -t nat -X KUBE-LEFTOVER; [ ! -e " + dir + "/nat ] || nft delete table ip nat"}},
		{"ipsets", []string{"ipset", "create", "gt-leftover", "hash:ip"}, []string{"ipset", "destroy", "gt-leftover"}},
		{"cgroups", []string{"mkdir", "/sys/fs/cgroup/pids/gt-leftover"}, []string{"rmdir", "/sys/fs/cgroup/pids/gt-leftover"}},
		{"compiled-in paths", []string{"mkdir", "/run/cdi"}, []string{"rmdir", "/run/cdi"}},
		{"mounts", []string{"mount", "-t", "tmpfs", "gt-leftover", mnt}, []string{"umount", mnt}},
		{"sysctls", []string{"sh", "-c", "echo $(( $(cat /proc/sys/kernel/panic) + 7 )) >/proc/sys/kernel/panic"},
			[]string{"sh", "-c", "echo $(( $(cat /proc/sys/kernel/panic) - 7 )) >/proc/sys/kernel/panic"}},
	}
	for _, l := range leftovers {
		t.Run(l.section, func(t *testing.T) {
			if l.section == "compiled-in paths" {
				if _, err := os.Stat("/run/cdi"); err == nil {
					t.Skip("/run/cdi is on this host already")
				}
			}
			before := hostState(t, root, dir)
			out, err := exec.Command(l.make[0], l.make[1:]...).CombinedOutput()
			require.NoError(t, err, string(out))
			after := hostState(t, root, dir)
			out, err = exec.Command(l.remove[0], l.remove[1:]...).CombinedOutput()
			require.NoError(t, err, string(out))
			require.NotEqual(t, before[l.section], after[l.section])
			require.Equal(t, before, hostState(t, root, dir), "the leftover was taken back")
		})
	}
}

// The nodes' images, packed afresh from the tools this checkout built, are the ones scripts/tools/nodeimages/images.lock
// records: same sources, same digests.
// lockLines are images.lock's lines: reference, digest, sources.
func lockLines(t *testing.T, root string) []string {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(root, "scripts", "tools", "nodeimages", "images.lock"))
	require.NoError(t, err)
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(string(lock)), "\n") {
		if !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	return lines
}

func TestTheLocalStackRunsTheLockedImagesByDigest(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	locked := map[string]bool{}
	for _, line := range lockLines(t, root) {
		f := strings.Fields(line)
		locked[f[0]+"@"+f[1]] = true
	}
	raw, err := os.ReadFile(filepath.Join(root, "stacks", "Pulumi.local.yaml"))
	require.NoError(t, err)
	var stack struct {
		Config struct {
			VCluster struct {
				Images map[string]string `json:"images"`
			} `json:"gpu-tenancy:vcluster"`
		} `json:"config"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &stack))
	images := stack.Config.VCluster.Images
	require.NotEmpty(t, images, "the local stack names the vCluster images built here")
	for key, ref := range images {
		assert.True(t, locked[ref], "vcluster.images.%s %q is no image of images.lock, by its digest", key, ref)
	}
}

func TestTheNodesImagesAreTheLockFiles(t *testing.T) {
	root := asRoot(t, "packs the images")
	want := lockLines(t, root)
	cmd := exec.Command(filepath.Join(root, "scripts", "local-cluster.sh"), "images")
	cmd.Env = append(os.Environ(), "GT_CLUSTER_DIR="+t.TempDir())
	out, err := cmd.Output()
	require.NoError(t, err, "local-cluster.sh images")
	require.Equal(t, want, strings.Split(strings.TrimSpace(string(out)), "\n"),
		"the images differ from images.lock: regenerate it as its header says, if a source changed on purpose")
}
