package harness

import (
	"fmt"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// DefaultRoutes lists the container's main-table default routes of one
// family (netlink.FAMILY_V4 or FAMILY_V6) as "via <gw> dev <if>".
func (c *Container) DefaultRoutes(t testing.TB, family int) []string {
	t.Helper()
	var out []string
	Must(t, c.NS.Do(func(ns.NetNS) error {
		rs, err := netlink.RouteList(nil, family)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Dst != nil {
				if ones, _ := r.Dst.Mask.Size(); ones != 0 {
					continue
				}
			}
			l, err := netlink.LinkByIndex(r.LinkIndex)
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("via %s dev %s", r.Gw, l.Attrs().Name))
		}
		return nil
	}))
	return out
}
