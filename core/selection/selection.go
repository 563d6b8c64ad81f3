// Package selection parses the Network Attachment Selection Annotation (s4).
package selection

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"

	"github.com/plexus-cni/plexus/core/names"
)

// Annotation is the pod annotation that selects secondary networks (s4.1).
const Annotation = "k8s.v1.cni.cncf.io/networks"

// Limits keep a hostile annotation from costing unbounded memory or time;
// Kubernetes caps all of a pod's annotations at 256 KiB together.
const (
	MaxAnnotationBytes = 256 << 10
	MaxSelections      = 64
)

// Format says which of the two s4.1 formats an annotation used.
type Format string

const (
	FormatNone  Format = ""
	FormatComma Format = "comma"
	FormatJSON  Format = "json"
)

// Element is one selection: one network attachment request (s4.2 makes a
// repeated network a separate Element).
type Element struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// IPs, MAC and Interface are the s4.1.2.1.3-5 requests, already validated.
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Interface string   `json:"interface,omitempty"`
	// DeviceID and InfinibandGUID are Multus's "deviceID" and
	// "infiniband-guid" keys (not in NPWG v1), already validated.
	DeviceID       string `json:"deviceID,omitempty"`
	InfinibandGUID string `json:"infiniband-guid,omitempty"`
	// Extensions holds the reverse-domain keys (s4.1.2.1) for the extension stage.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
	// Compat holds the keys without a period accepted with
	// ParseOptions.Compat (compat.go); nil without any.
	Compat *Compat `json:"compat,omitempty"`
	// Ignored maps each key plexus ignored to the reason.
	Ignored map[string]string `json:"ignored,omitempty"`
	// Raw is the element as written (for the comma format, as JSON).
	Raw json.RawMessage `json:"raw"`
}

// Ref is the "namespace/name" the element refers to (s4.1.1).
func (e *Element) Ref() string { return e.Namespace + "/" + e.Name }

// Result is a parsed annotation.
type Result struct {
	Format   Format
	Elements []*Element
	// Warnings name what was ignored without invalidating the annotation.
	Warnings []string
}

// Error says why an annotation is invalid; the spec makes an invalid
// annotation "invalid and ignored" (s4.1.2.1.3-5), the caller decides.
type Error struct {
	Index  int // element index, -1 for the annotation as a whole
	Reason string
}

func (e *Error) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("invalid %s annotation: %s", Annotation, e.Reason)
	}
	return fmt.Sprintf("invalid %s annotation: element %d: %s", Annotation, e.Index, e.Reason)
}

func errAt(i int, format string, args ...any) *Error {
	return &Error{Index: i, Reason: fmt.Sprintf(format, args...)}
}

// ParseOptions choose what Parse accepts beyond the specification.
type ParseOptions struct {
	// Compat accepts what pods written for Multus use: "name@ifname" in the
	// comma format and the keys of compat.go, otherwise reserved (s4.1.2.1).
	Compat bool
}

// Parse parses the annotation value for a pod in podNamespace as the
// specification alone defines it. An empty value selects nothing.
func Parse(value, podNamespace string) (*Result, error) {
	return ParseWith(value, podNamespace, ParseOptions{})
}

// ParseWith is Parse with options.
func ParseWith(value, podNamespace string, o ParseOptions) (*Result, error) {
	if len(value) > MaxAnnotationBytes {
		return nil, errAt(-1, "%d bytes exceeds the limit of %d", len(value), MaxAnnotationBytes)
	}
	trimmed := strings.TrimSpace(value)
	switch {
	case trimmed == "":
		return &Result{}, nil
	case trimmed[0] == '[':
		return parseJSON([]byte(trimmed), podNamespace, o)
	case trimmed[0] == '{':
		return nil, errAt(-1, "a JSON value must be a list of objects, not a single object")
	default:
		return parseComma(trimmed, podNamespace, o)
	}
}

// parseComma implements s4.1.1: "name" or "namespace/name", comma separated;
// with o.Compat either may end in "@ifname".
func parseComma(value, podNamespace string, o ParseOptions) (*Result, error) {
	parts := strings.Split(value, ",")
	if len(parts) > MaxSelections {
		return nil, errAt(-1, "%d selections exceed the limit of %d", len(parts), MaxSelections)
	}
	res := &Result{Format: FormatComma}
	for i, p := range parts {
		p = strings.TrimSpace(p)
		ref, ifName := p, ""
		if o.Compat {
			if before, after, found := strings.Cut(p, "@"); found {
				ref, ifName = before, after
				if err := names.SecondaryInterface(ifName); err != nil {
					return nil, errAt(i, "reference %q: interface after \"@\": %v", p, err)
				}
			}
		}
		ns, name := podNamespace, ref
		if before, after, found := strings.Cut(ref, "/"); found {
			ns, name = before, after
		}
		if err := validateRef(ns, name); err != nil {
			return nil, errAt(i, "reference %q: %v", p, err)
		}
		raw, _ := json.Marshal(commaRaw{Name: name, Namespace: ns, Interface: ifName})
		res.Elements = append(res.Elements, &Element{Index: i, Name: name, Namespace: ns, Interface: ifName, Raw: raw})
	}
	return res, nil
}

// commaRaw is a comma-format element as the JSON it stands for.
type commaRaw struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Interface string `json:"interface,omitempty"`
}

func validateRef(ns, name string) error {
	return cmp.Or(names.Label("namespace", ns), names.Label("network name", name))
}

// parseJSON implements s4.1.2.
func parseJSON(value []byte, podNamespace string, o ParseOptions) (*Result, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(value, &raws); err != nil {
		return nil, errAt(-1, "not a JSON list: %v", err)
	}
	if len(raws) > MaxSelections {
		return nil, errAt(-1, "%d selections exceed the limit of %d", len(raws), MaxSelections)
	}
	res := &Result{Format: FormatJSON}
	for i, raw := range raws {
		el, warnings, err := parseElement(i, raw, podNamespace, o)
		if err != nil {
			return nil, err
		}
		res.Elements = append(res.Elements, el)
		res.Warnings = append(res.Warnings, warnings...)
	}
	if err := checkDefaultRoutes(res.Elements); err != nil {
		return nil, err
	}
	return res, nil
}

func parseElement(i int, raw json.RawMessage, podNamespace string, o ParseOptions) (*Element, []string, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, nil, errAt(i, "must be a JSON object")
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return nil, nil, errAt(i, "%v", err)
	}
	el := &Element{Index: i, Namespace: podNamespace, Raw: raw}
	var warnings []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		v := keys[k]
		var err error
		switch {
		case k == "name":
			err = decodeString(v, &el.Name)
		case k == "namespace": // empty: the pod's (s4.1.2.1.1)
			var ns string
			err = decodeString(v, &ns)
			el.Namespace = cmp.Or(ns, el.Namespace)
		case k == "ips":
			el.IPs, err = decodeIPs(v)
		case k == "mac":
			el.MAC, err = decodeChecked(v, checkMAC)
		case k == "interface":
			el.Interface, err = decodeChecked(v, names.SecondaryInterface) // s4.1.2.1.5
		case k == DeviceIDKey && o.Compat:
			el.DeviceID, err = decodeChecked(v, func(s string) error { return names.DeviceID("device ID", s) })
		case k == InfinibandGUIDKey && o.Compat:
			el.InfinibandGUID, err = decodeChecked(v, checkGUID)
		case strings.Contains(k, "."):
			if el.Extensions == nil {
				el.Extensions = map[string]json.RawMessage{}
			}
			el.Extensions[k] = v
		case IsCompatKey(k) && o.Compat:
			err = decodeCompat(el, k, v)
		default:
			// s4.1.2.1 reserves keys without a period; an unknown one is not ours.
			reason := "unknown key: keys without a period are reserved by the specification"
			if IsCompatKey(k) {
				reason = "not in the specification and plexus's Multus compatibility is off (\"compat\": \"off\", or \"strictSelection\")"
			}
			el.ignore(k, reason)
		}
		if err != nil {
			return nil, nil, errAt(i, "key %q: %v", k, err)
		}
	}
	if _, ok := keys["name"]; !ok {
		return nil, nil, errAt(i, "the required key \"name\" is missing")
	}
	for _, k := range slices.Sorted(maps.Keys(el.Ignored)) {
		warnings = append(warnings, fmt.Sprintf("%s element %d: key %q ignored: %s", Annotation, i, k, el.Ignored[k]))
	}
	if err := validateRef(el.Namespace, el.Name); err != nil {
		return nil, nil, errAt(i, "%v", err)
	}
	return el, warnings, nil
}

// ignore records a key plexus does not act on.
func (e *Element) ignore(key, reason string) {
	if e.Ignored == nil {
		e.Ignored = map[string]string{}
	}
	e.Ignored[key] = reason
}

func decodeString(v json.RawMessage, dst *string) error {
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("must be a string")
	}
	return nil
}

// decodeIPs implements s4.1.2.1.3: at least one element, each a valid IPv4
// or IPv6 address (a CIDR is accepted too; its address part is what is requested).
func decodeIPs(v json.RawMessage) ([]string, error) {
	var ips []string
	if err := json.Unmarshal(v, &ips); err != nil {
		return nil, fmt.Errorf("must be a list of strings")
	}
	if len(ips) == 0 {
		return nil, fmt.Errorf("must contain at least one address")
	}
	for j, s := range ips {
		if _, _, err := net.ParseCIDR(s); err != nil && net.ParseIP(s) == nil {
			return nil, fmt.Errorf("element %d (%q) is not an IPv4 or IPv6 address", j, s)
		}
	}
	return ips, nil
}

// decodeChecked decodes a string and checks it.
func decodeChecked(v json.RawMessage, check func(string) error) (string, error) {
	var s string
	if err := decodeString(v, &s); err != nil {
		return "", err
	}
	return s, check(s)
}

// checkMAC implements s4.1.2.1.4: a 6-byte Ethernet or a 20-byte
// IP-over-InfiniBand address (RFC 4391 s9.1.1).
func checkMAC(s string) error {
	if hw, err := net.ParseMAC(s); err != nil || (len(hw) != 6 && len(hw) != 20) {
		return fmt.Errorf("%q is neither a 6-byte Ethernet nor a 20-byte InfiniBand hardware address", s)
	}
	return nil
}

// Keys outside NPWG v1 that plexus accepts, as Multus does: a device ID
// (PCI address, name or UUID) for the delegate, and an InfiniBand port
// GUID for ib-sriov. They reach the delegate as config and runtimeConfig.
const (
	DeviceIDKey       = "deviceID"
	InfinibandGUIDKey = "infiniband-guid"
)

// checkGUID checks an InfiniBand port GUID: 8 bytes (EUI-64) as hex pairs.
func checkGUID(s string) error {
	if hw, err := net.ParseMAC(s); err != nil || len(hw) != 8 {
		return fmt.Errorf("%q is not an 8-byte InfiniBand GUID (xx:xx:xx:xx:xx:xx:xx:xx)", s)
	}
	return nil
}
