package selection

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/plexus-cni/plexus/core/names"
)

// DefaultNetworkAnnotation chooses a pod's default network in place of the
// cluster-wide one (s6). It is Multus's, not the spec's, and plexus reads
// it in the same forms.
const DefaultNetworkAnnotation = "v1.multus-cni.io/default-network"

// maxDefaultNetworkBytes bounds the annotation: its longest valid value is
// a JSON list holding one object with a namespace and a name.
const maxDefaultNetworkBytes = 1024

// DefaultNetwork is the NAD a pod chose as its default network.
type DefaultNetwork struct {
	Namespace string
	Name      string
}

// Ref is "namespace/name".
func (d *DefaultNetwork) Ref() string { return d.Namespace + "/" + d.Name }

// ParseDefaultNetwork reads the DefaultNetworkAnnotation: "name",
// "namespace/name", a JSON object {"name": ..., "namespace": ...} or a JSON
// list of exactly one such object. Without a namespace it means
// defaultNamespace, the cluster-wide default network's, as in Multus.
// Anything else is refused: an interface (the runtime names it), other
// keys, more than one network.
func ParseDefaultNetwork(value, defaultNamespace string) (*DefaultNetwork, error) {
	if len(value) > maxDefaultNetworkBytes {
		return nil, defaultNetErr("%d bytes exceeds the limit of %d", len(value), maxDefaultNetworkBytes)
	}
	v := strings.TrimSpace(value)
	switch {
	case v == "":
		return nil, defaultNetErr("the value is empty; remove the annotation to use the cluster-wide default network")
	case v[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal([]byte(v), &list); err != nil {
			return nil, defaultNetErr("not a JSON list of objects: %v", err)
		}
		if len(list) != 1 {
			return nil, defaultNetErr("a JSON list must hold exactly one network, not %d", len(list))
		}
		return defaultNetFromObject(list[0], defaultNamespace)
	case v[0] == '{':
		return defaultNetFromObject([]byte(v), defaultNamespace)
	case strings.ContainsAny(v, ",@"):
		return nil, defaultNetErr("%q is not one network reference: a pod has one default network, and its interface is the runtime's (no @interface)", v)
	}
	ns, name, err := names.NADRef("network reference", v)
	if err != nil {
		return nil, defaultNetErr("%v", err)
	}
	return &DefaultNetwork{Namespace: cmp.Or(ns, defaultNamespace), Name: name}, nil
}

func defaultNetFromObject(v []byte, defaultNamespace string) (*DefaultNetwork, error) {
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	var obj struct {
		Name      *string `json:"name"`
		Namespace *string `json:"namespace"`
	}
	if err := dec.Decode(&obj); err != nil {
		return nil, defaultNetErr("want an object with only \"name\" and \"namespace\": %v", err)
	}
	if dec.More() {
		return nil, defaultNetErr("trailing data after the object")
	}
	if obj.Name == nil {
		return nil, defaultNetErr(`"name" is required`)
	}
	if err := names.Label(`"name"`, *obj.Name); err != nil {
		return nil, defaultNetErr("%v", err)
	}
	ns := defaultNamespace
	if obj.Namespace != nil {
		if err := names.Label(`"namespace"`, *obj.Namespace); err != nil {
			return nil, defaultNetErr("%v", err)
		}
		ns = *obj.Namespace
	}
	return &DefaultNetwork{Namespace: ns, Name: *obj.Name}, nil
}

func defaultNetErr(format string, args ...any) error {
	return fmt.Errorf("invalid %s annotation: %s", DefaultNetworkAnnotation, fmt.Sprintf(format, args...))
}
