// Package names validates every identifier plexus receives from pods, NADs and
// the runtime before it is used as a key, a CNI argument or part of a path.
package names

import (
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// pluginType is a CNI plugin executable name: a bare file name, never a path.
var pluginType = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)

const (
	maxLabel     = validation.DNS1123LabelMaxLength
	maxSubdomain = validation.DNS1123SubdomainMaxLength
	maxPlugin    = 255
)

// Label checks a DNS-1123 label (s3.3): a NAD name or a namespace, by
// apimachinery's rule, told in words rather than its regex (migration
// reports quote it).
func Label(what, s string) error {
	const kind = "a DNS-1123 label"
	if err := kubeLength(what, kind, s, maxLabel); err != nil {
		return err
	}
	if len(validation.IsDNS1123Label(s)) > 0 {
		return fmt.Errorf("%s %q is not %s (lower case alphanumerics or '-', starting and ending with an alphanumeric)", what, truncate(s), kind)
	}
	return nil
}

// Subdomain checks a DNS-1123 subdomain, the form of a pod name.
func Subdomain(what, s string) error {
	return kubeName(what, "a DNS-1123 subdomain", s, maxSubdomain, validation.IsDNS1123Subdomain)
}

// kubeName checks s with one of apimachinery's validators, the rules the
// API server applies, and names what was wrong with apimachinery's words.
func kubeName(what, kind, s string, max int, validate func(string) []string) error {
	if err := kubeLength(what, kind, s, max); err != nil {
		return err
	}
	if errs := validate(s); len(errs) > 0 {
		return fmt.Errorf("%s %q is not %s: %s", what, truncate(s), kind, strings.Join(errs, "; "))
	}
	return nil
}

// kubeLength refuses an empty or overlong name; an overlong one gets the
// length complaint alone, to keep a hostile value's error short.
func kubeLength(what, kind, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > max:
		return fmt.Errorf("%s %q is not %s: %s", what, truncate(s), kind, validation.MaxLenError(max))
	}
	return nil
}

// Interface checks a Linux interface name (s4.1.2.1.5) the way the kernel and
// libcni do: 1-15 bytes, not "." or "..", no '/', ':' or whitespace.
func Interface(s string) error { return cniName("interface name", s, utils.ValidateInterfaceName) }

// SecondaryInterface checks a name a pod asks for its secondary interface
// (s4.1.2.1.5): one the kernel leaves free. "lo" is in every namespace and
// the kernel refuses "all" and "default" (sysctl directories); a delegate
// given one fails its ADD and every DEL.
func SecondaryInterface(s string) error {
	if err := Interface(s); err != nil {
		return err
	}
	switch s {
	case "lo", "all", "default":
		return fmt.Errorf("interface name %q is reserved by the kernel", s)
	}
	return nil
}

// ContainerID checks a CNI container ID: alphanumerics, '_', '.', '-'.
func ContainerID(s string) error { return cniName("container ID", s, utils.ValidateContainerID) }

// Network checks a CNI network name, which libcni joins into cache paths.
func Network(s string) error { return cniName("network name", s, utils.ValidateNetworkName) }

// cniName checks s with one of libcni's validators.
func cniName(what, s string, validate func(string) *types.Error) error {
	if err := validate(s); err != nil {
		return fmt.Errorf("%s %q is invalid: %s", what, truncate(s), err.Msg)
	}
	return nil
}

// PluginType checks a CNI plugin "type": an executable name, never a path.
func PluginType(s string) error {
	if s == "" {
		return fmt.Errorf("plugin type is empty")
	}
	if len(s) > maxPlugin || !pluginType.MatchString(s) || s == "." || s == ".." {
		return fmt.Errorf("plugin type %q is not a plain executable name", truncate(s))
	}
	return nil
}

// maxQuoted bounds a name quoted in an error, so hostile input cannot
// flood error messages and logs.
const maxQuoted = 83

func truncate(s string) string { return Truncate(s, maxQuoted) }

// Truncate cuts s to at most max bytes, marking the cut with "..." and
// keeping whole runes: the bound of every text input can make long.
func Truncate(s string, max int) string {
	const mark = "..."
	if len(s) <= max {
		return s
	}
	if max <= len(mark) {
		return mark[:max]
	}
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// NADRef splits a NetworkAttachmentDefinition reference, "name" or
// "namespace/name" (s4.1.1), and checks both parts as DNS-1123 labels
// (s3.3), so neither can form a path. namespace is "" when it has none.
func NADRef(what, ref string) (namespace, name string, err error) {
	if len(ref) > 2*maxLabel+1 {
		return "", "", fmt.Errorf("%s %q is longer than a namespace/name reference can be", what, truncate(ref))
	}
	name = ref
	if before, after, found := strings.Cut(ref, "/"); found {
		namespace, name = before, after
		if err := Label(what+" namespace", namespace); err != nil {
			return "", "", err
		}
	}
	if err := Label(what+" name", name); err != nil {
		return "", "", err
	}
	return namespace, name, nil
}

// deviceID is a device ID as plexus accepts it: PCI addresses, names and
// UUIDs, never a separator or a leading dot, as it becomes part of a file
// name (device-info spec s4.1).
var deviceID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:\-]*$`)

// maxDeviceID bounds a device ID so "<resource>-<id>-device.json" stays a
// valid file name (255 bytes).
const maxDeviceID = 128

// ResourceName checks an extended resource name ("vendor.example/netdev")
// by the rules kubelet's device manager registers a resource under.
func ResourceName(what, s string) error {
	const kind = "an extended resource name (<DNS subdomain>/<name>, e.g. vendor.example/netdev)"
	return kubeName(what, kind, s, maxSubdomain+1+maxLabel, extendedResourceName)
}

// extendedResourceName is Kubernetes' IsExtendedResourceName
// (pkg/apis/core/v1/helper, not importable) from what apimachinery and
// k8s.io/api export: a name outside kubernetes.io that, prefixed with
// "requests.", is still a qualified name, for a ResourceQuota.
func extendedResourceName(s string) []string {
	switch {
	case !strings.Contains(s, "/"):
		return []string{"must have a domain prefix and '/'"}
	case strings.Contains(s, corev1.ResourceDefaultNamespacePrefix):
		return []string{"must not be in the " + corev1.ResourceDefaultNamespacePrefix + " domain, which Kubernetes reserves"}
	case strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix):
		return []string{"must not start with " + corev1.DefaultResourceRequestsPrefix}
	}
	return validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix + s)
}

// DeviceID checks a device ID from kubelet or a selection element.
func DeviceID(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > maxDeviceID:
		return fmt.Errorf("%s %q is longer than %d characters", what, truncate(s), maxDeviceID)
	case !deviceID.MatchString(s):
		return fmt.Errorf("%s %q is not a device ID (alphanumerics, '_', '.', ':', '-', starting with an alphanumeric)", what, truncate(s))
	}
	return nil
}
