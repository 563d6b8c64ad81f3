package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// kubeletSysctls are the kernel settings kubelet sets at start whatever its
// configuration (setupKernelTunables, with protectKernelDefaults off).
var kubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// hostPaths are the fixed paths kubelet and containerd create whatever
// their root, state and log directories: kubelet's device plugin socket
// directory, its container log symlinks and default pod logs, the CRI
// plugin's libcni result cache, containerd's shim sockets. Parents come
// before their children; restore removes them children first.
var hostPaths = []string{
	"/var/lib/kubelet",
	"/var/lib/kubelet/device-plugins",
	"/var/log/containers",
	"/var/log/pods",
	"/var/lib/cni",
	"/var/lib/cni/results",
	"/run/containerd",
	"/run/containerd/s",
}

// hostState is what the node changes outside its own directory, as it was
// before the node started.
type hostState struct {
	sysctls map[string]string
	absent  []string // hostPaths that did not exist
	// hintChain: kubelet's iptables hint chain existed (see pathWithout).
	hintChain bool
}

// hasKubeletChain reports whether kubelet's KUBE-IPTABLES-HINT chain
// exists (false when there is no iptables).
func hasKubeletChain() bool {
	ipt, err := lookPath("iptables")
	if err != nil {
		return false
	}
	return exec.Command(ipt, "-w", "-t", "mangle", "-S", "KUBE-IPTABLES-HINT").Run() == nil
}

func recordHost() (*hostState, error) {
	h := &hostState{sysctls: map[string]string{}}
	for _, s := range kubeletSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			return nil, fmt.Errorf("read sysctl %s: %w", s, err)
		}
		h.sysctls[s] = strings.TrimSpace(string(v))
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			h.absent = append(h.absent, p)
		}
	}
	h.hintChain = hasKubeletChain()
	return h, nil
}

// restore sets the sysctls back and removes the paths that did not exist
// before. It runs after kubelet and containerd stopped.
func (h *hostState) restore() error {
	var errs []error
	for _, s := range kubeletSysctls {
		want, ok := h.sysctls[s]
		if !ok {
			continue
		}
		p := filepath.Join("/proc/sys", s)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == want {
			continue
		}
		if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", s, want, err))
		}
	}
	for _, p := range slices.Backward(h.absent) {
		if err := removeCreated(p); err != nil {
			errs = append(errs, fmt.Errorf("remove %s, which the node created: %w", p, err))
		}
	}
	if !h.hintChain && hasKubeletChain() {
		errs = append(errs, errors.New("kubelet created iptables chains (KUBE-IPTABLES-HINT, KUBE-FIREWALL, KUBE-KUBELET-CANARY) though it runs without iptables in its PATH"))
	}
	return errors.Join(errs...)
}

// sharedCNIDir is libcni's default cache directory, which containerd's
// CRI plugin uses (it has no setting for it) and other runtimes and tools
// on the host share.
const sharedCNIDir = "/var/lib/cni"

// removeCreated removes a path the node created. Under sharedCNIDir only
// an empty directory goes: what another program wrote there meanwhile
// stays, and so does a result file of a sandbox whose DEL never came,
// which the suite's host check then reports.
func removeCreated(p string) error {
	if p != sharedCNIDir && !strings.HasPrefix(p, sharedCNIDir+"/") {
		return os.RemoveAll(p)
	}
	err := os.Remove(p)
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// unmountUnder detaches every mount point below dir, deepest first: what
// containerd left mounted (sandbox network namespaces, container root
// filesystems) when a test failed before its pods were removed.
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	sort.Sort(sort.Reverse(sort.StringSlice(points)))
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
