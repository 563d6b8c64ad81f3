// Command vmrunc is runc for CRI-O on hosts, such as the VMs and
// containers the tests run in, that refuse what containerd's config works
// around and CRI-O has no setting for. It edits the bundle's config.json
// of a create or run, then execs runc with the same arguments:
//
//   - process.oomScoreAdj is raised to vmrunc's own oom_score_adj when
//     lower, as containerd's restrict_oom_score_adj does: lowering it needs
//     CAP_SYS_RESOURCE in the host's user namespace, and runc fails the
//     container ("failed to update /proc/self/oom_score_adj: Permission
//     denied") for the node-critical pods kubelet gives -997.
//   - capabilities outside vmrunc's own bounding set are dropped from
//     process.capabilities, as containerd gives a privileged container the
//     capabilities it has itself: CRI-O gives it every capability the
//     kernel knows, and runc fails ("unable to apply caps: operation not
//     permitted") where the host withholds some (CAP_SYS_RESOURCE here).
//   - linux.resources.hugepageLimits is dropped when the host has no
//     hugetlb cgroup mounted: CRI-O sets kubelet's hugepage limits whenever
//     the kernel has the controller (/proc/cgroups), and runc then fails
//     ("cannot set hugetlb limit: container could not join or create
//     cgroup"); containerd tolerates the missing controller.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/moby/sys/capability"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "vmrunc: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	runc, err := findRunc()
	if err != nil {
		return err
	}
	if slices.Contains(args, "create") || slices.Contains(args, "run") {
		if err := adjustSpec(bundle(args)); err != nil {
			return err
		}
	}
	return syscall.Exec(runc, append([]string{runc}, args...), os.Environ())
}

// bundle is the --bundle (-b) argument, else the working directory, as
// runc reads it.
func bundle(args []string) string {
	for i, a := range args {
		if (a == "--bundle" || a == "-b") && i+1 < len(args) {
			return args[i+1]
		}
		for _, p := range []string{"--bundle=", "-b="} {
			if len(a) > len(p) && a[:len(p)] == p {
				return a[len(p):]
			}
		}
	}
	return "."
}

func adjustSpec(dir string) error {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec map[string]any
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	own, err := ownOOMScoreAdj()
	if err != nil {
		return err
	}
	if process, ok := spec["process"].(map[string]any); ok {
		if adj, ok := process["oomScoreAdj"].(float64); ok && int(adj) < own {
			process["oomScoreAdj"] = own
		}
		if caps, ok := process["capabilities"].(map[string]any); ok {
			if err := boundCapabilities(caps); err != nil {
				return err
			}
		}
	}
	if !hugetlbMounted() {
		linux, _ := spec["linux"].(map[string]any)
		res, _ := linux["resources"].(map[string]any)
		delete(res, "hugepageLimits")
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// boundCapabilities removes from each set of caps (bounding, effective,
// ...) the capabilities outside this process's bounding set.
func boundCapabilities(caps map[string]any) error {
	withheld := map[string]bool{}
	for _, c := range capability.ListKnown() {
		ok, err := capability.GetBound(c)
		if err != nil {
			return fmt.Errorf("bounding set: %w", err)
		}
		if !ok {
			withheld["CAP_"+strings.ToUpper(c.String())] = true
		}
	}
	for set, v := range caps {
		names, ok := v.([]any)
		if !ok {
			continue
		}
		kept := make([]any, 0, len(names))
		for _, n := range names {
			if s, _ := n.(string); !withheld[s] {
				kept = append(kept, n)
			}
		}
		caps[set] = kept
	}
	return nil
}

func ownOOMScoreAdj() (int, error) {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// hugetlbMounted reports whether the host has a hugetlb cgroup: cgroup
// v2, or a v1 hierarchy of it.
func hugetlbMounted() bool {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return true
	}
	_, err := os.Stat("/sys/fs/cgroup/hugetlb")
	return err == nil
}

// findRunc is runc from PATH or the sbin directories Debian puts it in.
func findRunc() (string, error) {
	if p, err := exec.LookPath("runc"); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/local/sbin", "/usr/sbin", "/sbin"} {
		if p := filepath.Join(d, "runc"); isExec(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("runc not found in PATH or the sbin directories")
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
