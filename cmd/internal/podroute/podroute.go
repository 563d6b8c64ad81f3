// Package podroute changes routes inside a pod's network namespace, for
// the pipeline's Router (the Multus-compatible "default-route" key).
package podroute

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/plexus-cni/plexus/cmd/internal/hostroot"
)

// Netlink is the Router that uses netlink in the pod's namespace.
type Netlink struct {
	// Root is the host's root directory (hostroot); "" is this process's.
	Root string
}

// ownNetNS is this process's network namespace.
const ownNetNS = "/proc/self/ns/net"

// CheckNetNS refuses a path that exists but is not a network namespace
// (nsfs or procfs), and reports whether it is this process's. The path is
// opened under Root, as the delegates will open it. A missing one is the
// delegates' to report: CNI lets DEL run after the namespace is gone.
func (n Netlink) CheckNetNS(path string) (own bool, err error) {
	f, err := hostroot.Open(n.Root, path, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return false, fmt.Errorf("network namespace %s: %w", path, err)
	}
	if st.Type != unix.NSFS_MAGIC && st.Type != unix.PROC_SUPER_MAGIC {
		return false, fmt.Errorf("%s is not a network namespace (file system type %#x)", path, st.Type)
	}
	return isOwnNetNS(f)
}

// isOwnNetNS reports whether f is this process's network namespace.
func isOwnNetNS(f *os.File) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	own, err := os.Stat(ownNetNS)
	if err != nil {
		return false, fmt.Errorf("reading this process's own network namespace: %w", err)
	}
	return os.SameFile(held, own), nil
}

// ReplaceDefaultRoute replaces every default route of gw's family in the
// main table with "default via gw dev ifName", putting the old ones back
// if the add fails.
func (n Netlink) ReplaceDefaultRoute(_ context.Context, netnsPath, ifName string, gw net.IP) error {
	// A handle bound to the namespace: no thread has to enter it.
	f, err := hostroot.Open(n.Root, netnsPath, 0)
	if err != nil {
		return fmt.Errorf("opening network namespace %s: %w", netnsPath, err)
	}
	defer f.Close()
	h, err := netlink.NewHandleAt(netns.NsHandle(int(f.Fd())))
	if err != nil {
		return fmt.Errorf("netlink in %s: %w", netnsPath, err)
	}
	defer h.Close()
	return replace(h, ifName, gw)
}

func replace(h *netlink.Handle, ifName string, gw net.IP) error {
	link, err := h.LinkByName(ifName)
	if err != nil {
		return fmt.Errorf("interface %s: %w", ifName, err)
	}
	fam := netlink.FAMILY_V4
	if gw.To4() == nil {
		fam = netlink.FAMILY_V6
	}
	old, err := defaults(h, fam)
	if err != nil {
		return err
	}
	for i := range old {
		if err := h.RouteDel(&old[i]); err != nil {
			return fmt.Errorf("removing default route %s: %w", old[i], err)
		}
	}
	r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw, Table: unix.RT_TABLE_MAIN, Scope: netlink.SCOPE_UNIVERSE}
	if err := h.RouteAdd(r); err != nil {
		for i := range old {
			_ = h.RouteAdd(&old[i])
		}
		return fmt.Errorf("adding default via %s dev %s: %w", gw, ifName, err)
	}
	return nil
}

// defaults lists the main table's default routes of one family.
func defaults(h *netlink.Handle, fam int) ([]netlink.Route, error) {
	filter := &netlink.Route{Table: unix.RT_TABLE_MAIN}
	var routes []netlink.Route
	var err error
	for try := 0; try < 5; try++ {
		routes, err = h.RouteListFiltered(fam, filter, netlink.RT_FILTER_TABLE)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("listing routes: %w", err)
	}
	return slices.DeleteFunc(routes, func(r netlink.Route) bool { return !isDefault(r.Dst) }), nil
}

func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}
