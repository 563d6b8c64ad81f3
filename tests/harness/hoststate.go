package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// HostState is what a suite could leave behind on the host, by name: every
// entry under the host's CNI directories (hostDirs), and the network
// namespaces in /run/netns, the links and the iptables nat and filter
// chains whose names look like the tests' own (the prefixes below). Other
// software's namespaces, links and chains are left out, so it may change
// them while a suite runs. Two plexus suites at once on one host are not
// supported: each would see the other's.
type HostState []string

// hostDirs are host directories the tests must never write: libcni's
// default cache (results) and host-local's default dataDir live in
// /var/lib/cni, plexusd's default socket in /run/plexus.
func hostDirs() []string { return []string{"/var/lib/cni", "/run/plexus"} }

// hostNetnsDir is where testutils.NewNS mounts the sandboxes' namespaces.
const hostNetnsDir = "/run/netns"

// Prefixes of the names the tests and the plugins they run give to what
// they create on the host, space-separated.
const (
	// testutils.NewNS names a namespace cni-<uuid>.
	netnsPrefixes = "cni-"
	// px: the harness's bridges (pxb) and the tests' own links (pxm,
	// pxdv, pxdr); veth: the host ends the bridge and ptp plugins make;
	// bwp: the bandwidth plugin's ifb devices.
	linkPrefixes = "px veth bwp"
	// CNI-: the portmap and bridge plugins' chains; KUBE-: kubelet's.
	chainPrefixes = "CNI- KUBE-"
)

// SnapshotHost records the host's state for CheckHost.
func SnapshotHost() (HostState, error) {
	var s HostState
	for _, d := range hostDirs() {
		names, err := treeNames(d)
		if err != nil {
			return nil, err
		}
		s = append(s, names...)
	}
	netns, err := netnsNames()
	if err != nil {
		return nil, err
	}
	links, err := linkNames()
	if err != nil {
		return nil, err
	}
	chains, err := chainNames()
	if err != nil {
		return nil, err
	}
	s = append(append(append(s, netns...), links...), chains...)
	slices.Sort(s)
	return slices.Compact(s), nil
}

// treeNames lists dir and everything under it as "file <path>"; nothing
// when dir does not exist.
func treeNames(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone meanwhile, or dir absent
		}
		if err != nil {
			return err
		}
		out = append(out, "file "+p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return out, nil
}

func netnsNames() ([]string, error) {
	entries, err := os.ReadDir(hostNetnsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", hostNetnsDir, err)
	}
	var out []string
	for _, e := range entries {
		if hasPrefix(e.Name(), netnsPrefixes) {
			out = append(out, "netns "+e.Name())
		}
	}
	return out, nil
}

func linkNames() ([]string, error) {
	ls, err := linkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	var out []string
	for _, l := range ls {
		if hasPrefix(l.Attrs().Name, linkPrefixes) {
			out = append(out, "link "+l.Attrs().Name)
		}
	}
	return out, nil
}

// chainNames lists the nat and filter chains of iptables and ip6tables as
// "chain <tool> <table> <name>"; a missing tool is skipped.
func chainNames() ([]string, error) {
	var out []string
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		path, err := sbinLookPath(tool)
		if err != nil {
			continue
		}
		for _, table := range []string{"nat", "filter"} {
			b, err := exec.Command(path, "-t", table).Output()
			if err != nil {
				return nil, fmt.Errorf("%s -t %s: %w", tool, table, err)
			}
			for _, c := range parseChains(b) {
				if hasPrefix(c, chainPrefixes) {
					out = append(out, fmt.Sprintf("chain %s %s %s", tool, table, c))
				}
			}
		}
	}
	return out, nil
}

// parseChains reads the chain names of iptables-save's output (":NAME
// POLICY [counters]" lines).
func parseChains(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, ok := strings.CutPrefix(sc.Text(), ":")
		if f := strings.Fields(name); ok && len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// sbinLookPath is exec.LookPath that also searches the sbin directories,
// which a user's PATH may lack.
func sbinLookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		if p, err := exec.LookPath(filepath.Join(d, name)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}

func hasPrefix(s, prefixes string) bool {
	for _, p := range strings.Fields(prefixes) {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// DiffHost lists every difference between two snapshots, as "appeared: X"
// or "disappeared: X".
func DiffHost(before, after HostState) []string {
	var out []string
	for _, x := range after {
		if !slices.Contains(before, x) {
			out = append(out, "appeared: "+x)
		}
	}
	for _, x := range before {
		if !slices.Contains(after, x) {
			out = append(out, "disappeared: "+x)
		}
	}
	return out
}

// hostSettle bounds the wait for the host to settle: the kernel removes a
// network namespace, and the veths in it, some time after its last handle
// closed.
const hostSettle = 5 * time.Second

// CheckHost compares the host with before, until they agree or hostSettle
// passed, and describes every difference in the error.
func CheckHost(before HostState) error {
	deadline := time.Now().Add(hostSettle)
	for {
		after, err := SnapshotHost()
		if err != nil {
			return fmt.Errorf("host check: %w", err)
		}
		diff := DiffHost(before, after)
		if len(diff) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the suite changed the host:\n\t%s", strings.Join(diff, "\n\t"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runChecked runs the suite between two snapshots of the host and fails it
// when they differ: a suite must leave the host as it found it.
func runChecked(m interface{ Run() int }) int {
	before, err := SnapshotHost()
	if err != nil {
		fmt.Fprintf(os.Stderr, "host check: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := CheckHost(before); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		return 1
	}
	return code
}
