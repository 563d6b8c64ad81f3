package selection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Keys without a period that pods written for the reference implementation
// (Multus) use. s4.1.2.1 reserves such keys, so plexus accepts them only
// with ParseOptions.Compat, and validates each as strictly as "ips" and
// "mac". To accept another key: add a constant, a case in IsCompatKey and
// one in decodeCompat, and a field to Compat.
const (
	KeyDefaultRoute = "default-route"
	KeyCNIArgs      = "cni-args"
	KeyPortMappings = "portMappings"
	KeyBandwidth    = "bandwidth"
)

// Compat holds an element's compat keys, validated.
type Compat struct {
	// DefaultRoute lists the gateways (at most one per IP family) the
	// pod's default route must use instead of the default network's.
	DefaultRoute []string `json:"defaultRoute,omitempty"`
	// CNIArgs is merged into the delegate's args.cni. It never holds a key
	// a delegate would read as one of ArgKeys: those the policy checks and
	// plexus verifies after ADD come only from the element's own keys.
	CNIArgs map[string]any `json:"cniArgs,omitempty"`
	// PortMappings and Bandwidth are runtimeConfig for delegates declaring
	// those capabilities.
	PortMappings []PortMapping `json:"portMappings,omitempty"`
	Bandwidth    *Bandwidth    `json:"bandwidth,omitempty"`
}

// PortMapping is one entry of the CNI "portMappings" capability
// (CNI CONVENTIONS.md).
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol,omitempty"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Bandwidth is the CNI "bandwidth" capability: rates in bits per second,
// bursts in bits (CNI CONVENTIONS.md).
type Bandwidth struct {
	IngressRate  int64 `json:"ingressRate,omitempty"`
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	EgressRate   int64 `json:"egressRate,omitempty"`
	EgressBurst  int64 `json:"egressBurst,omitempty"`
}

// IsCompatKey reports a key accepted with ParseOptions.Compat.
func IsCompatKey(k string) bool {
	return slices.Contains([]string{KeyDefaultRoute, KeyCNIArgs, KeyPortMappings, KeyBandwidth, DeviceIDKey, InfinibandGUIDKey}, k)
}

// ArgKeys are the args.cni keys plexus sets from an element's own keys
// (s4.1.2.1.3.2, s4.1.2.1.4.2, and Multus's InfiniBand GUID).
func ArgKeys() []string { return []string{"ips", "mac", InfinibandGUIDKey} }

// SameArgKey reports whether a delegate decoding args.cni with
// encoding/json could read key a as key b: it matches keys with Unicode
// simple folding ("IPs", "ipſ"), and json/v2 also ignores dashes and
// underscores.
func SameArgKey(a, b string) bool { return FoldArgKey(a) == FoldArgKey(b) }

// FoldArgKey maps every key SameArgKey equates to one string: dashes and
// underscores dropped, each rune the smallest of its simple fold orbit.
func FoldArgKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	for _, r := range k {
		if r == '-' || r == '_' {
			continue
		}
		b.WriteRune(foldRune(r))
	}
	return b.String()
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// plexusArgKey returns the key of ArgKeys a delegate would read k as.
func plexusArgKey(k string) (string, bool) {
	for _, own := range ArgKeys() {
		if SameArgKey(k, own) {
			return own, true
		}
	}
	return "", false
}

func decodeCompat(el *Element, k string, v json.RawMessage) error {
	if el.Compat == nil {
		el.Compat = &Compat{}
	}
	var err error
	switch k {
	case KeyDefaultRoute:
		el.Compat.DefaultRoute, err = decodeDefaultRoute(v)
	case KeyCNIArgs:
		el.Compat.CNIArgs, err = decodeCNIArgs(v)
	case KeyPortMappings:
		el.Compat.PortMappings, err = decodePortMappings(v)
	case KeyBandwidth:
		el.Compat.Bandwidth, err = decodeBandwidth(v)
	}
	return err
}

// decodeDefaultRoute: a non-empty list of gateway addresses, at most one
// per IP family.
func decodeDefaultRoute(v json.RawMessage) ([]string, error) {
	var gws []string
	if err := json.Unmarshal(v, &gws); err != nil {
		return nil, fmt.Errorf("must be a list of gateway IP addresses")
	}
	if len(gws) == 0 {
		return nil, fmt.Errorf("must contain at least one gateway address")
	}
	seen := map[string]int{}
	for j, s := range gws {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("element %d (%q) is not an IPv4 or IPv6 address", j, s)
		}
		if ip.IsUnspecified() || ip.IsMulticast() {
			return nil, fmt.Errorf("element %d (%q) cannot be a gateway", j, s)
		}
		fam := family(ip)
		if prev, dup := seen[fam]; dup {
			return nil, fmt.Errorf("elements %d and %d are both %s gateways; a pod has one default route per family", prev, j, fam)
		}
		seen[fam] = j
	}
	return gws, nil
}

func family(ip net.IP) string {
	if ip.To4() != nil {
		return "IPv4"
	}
	return "IPv6"
}

// checkDefaultRoutes: one default route per family for the whole pod.
func checkDefaultRoutes(els []*Element) error {
	by := map[string]int{}
	for _, el := range els {
		if el.Compat == nil {
			continue
		}
		for _, gw := range el.Compat.DefaultRoute {
			fam := family(net.ParseIP(gw))
			if prev, dup := by[fam]; dup {
				return errAt(el.Index, "key %q: element %d already sets the %s default route; a pod has one per family", KeyDefaultRoute, prev, fam)
			}
			by[fam] = el.Index
		}
	}
	return nil
}

// decodeCNIArgs: a JSON object whose keys a delegate reads as distinct and
// as none of ArgKeys (see Compat.CNIArgs).
func decodeCNIArgs(v json.RawMessage) (map[string]any, error) {
	if t := bytes.TrimSpace(v); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("must be a JSON object")
	}
	var args map[string]any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber() // keep numbers as written
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("must be a JSON object: %v", err)
	}
	folded := make(map[string]string, len(args))
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if k == "" {
			return nil, fmt.Errorf("an empty key is not allowed")
		}
		if own, ok := plexusArgKey(k); ok {
			return nil, fmt.Errorf("key %q is read by delegates as %q, which plexus sets only from the element's own %q key: set it there", k, own, own)
		}
		f := FoldArgKey(k)
		if prev, dup := folded[f]; dup {
			return nil, fmt.Errorf("keys %q and %q are the same key to a delegate, which matches keys ignoring case", prev, k)
		}
		folded[f] = k
	}
	if len(args) == 0 {
		return nil, nil
	}
	return args, nil
}

// decodePortMappings: a non-empty list of {hostPort, containerPort,
// protocol, hostIP}; ports 1-65535, protocol tcp, udp or sctp.
func decodePortMappings(v json.RawMessage) ([]PortMapping, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(v, &raws); err != nil {
		return nil, fmt.Errorf("must be a list of port mappings")
	}
	if len(raws) == 0 {
		return nil, fmt.Errorf("must contain at least one port mapping")
	}
	out := make([]PortMapping, len(raws))
	for j, r := range raws {
		pm, err := decodePortMapping(r)
		if err != nil {
			return nil, fmt.Errorf("element %d: %v", j, err)
		}
		out[j] = pm
	}
	return out, nil
}

func decodePortMapping(r json.RawMessage) (PortMapping, error) {
	var pm PortMapping
	fields, err := object(r, "hostPort", "containerPort", "protocol", "hostIP")
	if err != nil {
		return pm, err
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"hostPort", &pm.HostPort}, {"containerPort", &pm.ContainerPort}} {
		n, err := integer(fields[f.key], f.key, 1, 65535)
		if err != nil {
			return pm, err
		}
		*f.dst = int(n)
	}
	if p, ok := fields["protocol"]; ok {
		if err := json.Unmarshal(p, &pm.Protocol); err != nil {
			return pm, fmt.Errorf(`"protocol" must be a string`)
		}
		pm.Protocol = strings.ToLower(pm.Protocol)
		if pm.Protocol != "tcp" && pm.Protocol != "udp" && pm.Protocol != "sctp" {
			return pm, fmt.Errorf(`"protocol" %q is not one of tcp, udp, sctp`, pm.Protocol)
		}
	}
	if h, ok := fields["hostIP"]; ok {
		if err := json.Unmarshal(h, &pm.HostIP); err != nil || net.ParseIP(pm.HostIP) == nil {
			return pm, fmt.Errorf(`"hostIP" must be an IPv4 or IPv6 address`)
		}
	}
	return pm, nil
}

// decodeBandwidth: an object of non-negative integer rates and bursts.
func decodeBandwidth(v json.RawMessage) (*Bandwidth, error) {
	keys := []string{"ingressRate", "ingressBurst", "egressRate", "egressBurst"}
	fields, err := object(v, keys...)
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("must set at least one of %s", strings.Join(keys, ", "))
	}
	bw := &Bandwidth{}
	dst := []*int64{&bw.IngressRate, &bw.IngressBurst, &bw.EgressRate, &bw.EgressBurst}
	for i, k := range keys {
		raw, ok := fields[k]
		if !ok {
			continue
		}
		n, err := integer(raw, k, 0, 1<<62)
		if err != nil {
			return nil, err
		}
		*dst[i] = n
	}
	return bw, nil
}

// object decodes a JSON object whose keys must be among allowed.
func object(r json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	if t := bytes.TrimSpace(r); len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("must be a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r, &fields); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("unknown key %q (allowed: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return fields, nil
}

// integer reads a required whole number within [lo, hi].
func integer(raw json.RawMessage, key string, lo, hi int64) (int64, error) {
	if raw == nil {
		return 0, fmt.Errorf("%q is required", key)
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%q must be a whole number from %d to %d, not %s", key, lo, hi, raw)
	}
	return n, nil
}

// DelegateArgs is the args.cni object the element gives its delegates:
// its cni-args, then the keys plexus sets from the element's own keys
// (s4.1.2.1.3.2, s4.1.2.1.4.2). nil when there is none. Policies see this
// object as the delegates will.
func (e *Element) DelegateArgs() map[string]any {
	args := map[string]any{}
	if e.Compat != nil {
		maps.Copy(args, e.Compat.CNIArgs)
	}
	if e.InfinibandGUID != "" {
		args[InfinibandGUIDKey] = e.InfinibandGUID
	}
	if len(e.IPs) > 0 {
		args["ips"] = e.IPs
	}
	if e.MAC != "" {
		args["mac"] = e.MAC
	}
	if len(args) == 0 {
		return nil
	}
	return args
}
