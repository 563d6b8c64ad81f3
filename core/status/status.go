// Package status builds the Network Attachment Status Annotation (s5).
package status

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

// Annotation is the pod annotation holding the status list (s5).
const Annotation = "k8s.v1.cni.cncf.io/network-status"

// DNS is the s5.3.6 map.
type DNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
}

// Entry is one status map (s5.3). Extra holds enrichers' reverse-domain keys.
type Entry struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Default   bool     `json:"default"`
	DNS       *DNS     `json:"dns,omitempty"`
	// DeviceInfo is the device-info spec v1.1 s6.1 map, as the CNI file
	// holds it after the delegate ran.
	DeviceInfo json.RawMessage            `json:"device-info,omitempty"`
	Extra      map[string]json.RawMessage `json:"-"`
}

// plainEntry is Entry without its methods: the s5.3 keys alone.
type plainEntry Entry

// SetExtra adds a reverse-domain key (s5.3).
func (e *Entry) SetExtra(key string, value json.RawMessage) error {
	if !strings.Contains(key, ".") {
		return fmt.Errorf("status key %q is reserved: implementation keys must use reverse domain notation (s5.3)", key)
	}
	if !json.Valid(value) {
		return fmt.Errorf("status key %q: value is not valid JSON", key)
	}
	if e.Extra == nil {
		e.Extra = map[string]json.RawMessage{}
	}
	e.Extra[key] = value
	return nil
}

// MarshalJSON writes the s5.3 keys first, then extra keys sorted.
func (e Entry) MarshalJSON() ([]byte, error) {
	base, err := json.Marshal(plainEntry(e))
	if err != nil || len(e.Extra) == 0 {
		return base, err
	}
	var b bytes.Buffer
	b.Write(base[:len(base)-1])
	for _, k := range slices.Sorted(maps.Keys(e.Extra)) {
		kb, _ := json.Marshal(k)
		b.WriteByte(',')
		b.Write(kb)
		b.WriteByte(':')
		b.Write(e.Extra[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads an entry, keeping reverse-domain keys in Extra.
func (e *Entry) UnmarshalJSON(data []byte) error {
	var p plainEntry
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return err
	}
	*e = Entry(p)
	maps.DeleteFunc(all, func(k string, _ json.RawMessage) bool { return !strings.Contains(k, ".") })
	if len(all) > 0 {
		e.Extra = all
	}
	return nil
}

// Minimal is the entry for an attachment whose delegate returned no
// result (s5.1.1).
func Minimal(name, ifName string, isDefault bool) *Entry {
	return &Entry{Name: name, Interface: ifName, Default: isDefault}
}

// FromResult builds an attachment's entry from its CNI result of any
// version (s5.1.1); ifName is the fallback for results before 0.3.0
// (s5.3.2.1).
func FromResult(name, ifName string, isDefault bool, res types.Result) (*Entry, error) {
	if res == nil {
		return Minimal(name, ifName, isDefault), nil
	}
	legacy := isLegacy(res)
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("converting %s result of network %q: %w", res.Version(), name, err)
	}
	e := &Entry{Name: name, Default: isDefault}
	sandbox := SandboxInterface(r)
	switch {
	case sandbox >= 0:
		// s5.3.2.1, s5.3.4.1: the first interface with a sandbox.
		e.Interface = r.Interfaces[sandbox].Name
		e.MAC = r.Interfaces[sandbox].Mac
	case legacy:
		// s5.3.2.1: results before 0.3.0 have no interfaces.
		e.Interface = ifName
	}
	e.IPs = ips(r, sandbox)
	e.DNS = dns(r.DNS)
	if e.Interface == "" {
		e.MAC = "" // s5.3.4: "mac" requires "interface"
	}
	return e, nil
}

// isLegacy reports a result from before 0.3.0 (ip4/ip6, no interfaces).
func isLegacy(res types.Result) bool {
	switch res.Version() {
	case "0.1.0", "0.2.0", "":
		return true
	}
	return false
}

// SandboxInterface is the index of the first interface with a sandbox, or -1.
func SandboxInterface(r *types100.Result) int {
	return slices.IndexFunc(r.Interfaces, func(i *types100.Interface) bool { return i != nil && i.Sandbox != "" })
}

// addresses implements s5.3.3.1: addresses on the first sandbox interface,
// or with none, those bound to no interface; dual-stack reports both.
func addresses(r *types100.Result, sandbox int) []net.IP {
	var out []net.IP
	for _, ip := range r.IPs {
		if ip == nil || ip.Address.IP.To16() == nil {
			continue // no address ("ip4": {} of a 0.2.0 result)
		}
		var match bool
		if sandbox >= 0 {
			match = ip.Interface != nil && *ip.Interface == sandbox
		} else {
			match = ip.Interface == nil || *ip.Interface < 0
		}
		if match {
			out = append(out, ip.Address.IP)
		}
	}
	return out
}

// ips is the s5.3.3 value: the addresses of s5.3.3.1 without prefix length
// ("10.1.0.5"), as the spec's "array of addresses" says, Multus writes and
// consumers parse; IPv6 in RFC 5952 form (net.IP.String).
func ips(r *types100.Result, sandbox int) []string {
	var out []string
	for _, ip := range addresses(r, sandbox) {
		out = append(out, ip.String())
	}
	return out
}

// BareIPs rewrites the prefixes in e's "ips" ("10.1.0.5/24") to their
// address (s5.3.3), for entries published so, and reports whether it did.
func (e *Entry) BareIPs() bool {
	changed := false
	for i, s := range e.IPs {
		if p, err := netip.ParsePrefix(s); err == nil {
			e.IPs[i] = p.Addr().Unmap().String()
			changed = true
		}
	}
	return changed
}

func dns(d types.DNS) *DNS {
	if len(d.Nameservers) == 0 && d.Domain == "" && len(d.Search) == 0 {
		return nil
	}
	return &DNS{Nameservers: d.Nameservers, Domain: d.Domain, Search: d.Search}
}

// Marshal encodes the list as the annotation value.
func Marshal(entries []*Entry) ([]byte, error) {
	if entries == nil {
		entries = []*Entry{}
	}
	return json.MarshalIndent(entries, "", "    ")
}

// AddressesOn returns the addresses of s5.3.3.1 and the sandbox
// interface's MAC: what s4.1.2.1.3.2 and s4.1.2.1.4.2 verify against.
func AddressesOn(res types.Result) (addrs []net.IP, mac string, err error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return nil, "", err
	}
	sandbox := SandboxInterface(r)
	addrs = addresses(r, sandbox)
	if sandbox >= 0 {
		mac = r.Interfaces[sandbox].Mac
	}
	return addrs, mac, nil
}
