// Package migrate turns a Multus configuration into the equivalent plexus
// config and policy data (plexusctl migrate), and says what it could not
// carry over and why. The option names and meanings come from Multus's
// documented configuration reference.
package migrate

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/names"
	"github.com/plexus-cni/plexus/policies"
)

// multusConfDir is Multus's default confDir, kept so that the migrated
// config means the same (plexus's differs).
const multusConfDir = "/etc/cni/multus/net.d"

// DefaultPolicyDir is where the migrated config expects the policy
// library and the generated data file on the node.
const DefaultPolicyDir = "/etc/plexus/policy"

// PolicyDataFile is the generated policy data file's name.
const PolicyDataFile = "migrated-from-multus.yaml"

// Note is one key that was not carried over as is.
type Note struct {
	Key    string
	Reason string
}

// Result is the migration.
type Result struct {
	// Source says where the Multus config was found.
	Source string
	// Config is the plexus config; Policy the policy data document, nil
	// when the Multus config needs no policy.
	Config map[string]any
	Policy map[string]any
	Notes  []Note
}

// Read finds the Multus config in data: a CNI conf whose type is multus or
// multus-shim, a conflist holding such a plugin, or a ConfigMap (YAML or
// JSON) one of whose data values is either.
func Read(data []byte) (map[string]json.RawMessage, string, error) {
	if m, where, ok := fromJSON(data); ok {
		return m, where, nil
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Kind != "ConfigMap" {
		return nil, "", fmt.Errorf("not a Multus CNI config (a conf or conflist with a plugin of type multus or multus-shim) nor a ConfigMap holding one")
	}
	m, where, err := FromConfigMap(&cm)
	return m, ": " + where, err
}

// FromConfigMap finds the Multus config in a ConfigMap's data.
func FromConfigMap(cm *corev1.ConfigMap) (map[string]json.RawMessage, string, error) {
	keys := slices.Sorted(maps.Keys(cm.Data))
	for _, k := range keys {
		if m, where, ok := fromJSON([]byte(cm.Data[k])); ok {
			return m, fmt.Sprintf("ConfigMap %s/%s, key %s%s", cm.Namespace, cm.Name, k, where), nil
		}
	}
	return nil, "", fmt.Errorf("ConfigMap %s/%s: none of its keys (%s) holds a Multus CNI config", cm.Namespace, cm.Name, strings.Join(keys, ", "))
}

func fromJSON(data []byte) (map[string]json.RawMessage, string, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil || top == nil {
		return nil, "", false
	}
	if isMultus(top) {
		return top, "", true
	}
	var plugins []map[string]json.RawMessage
	if json.Unmarshal(top["plugins"], &plugins) != nil {
		return nil, "", false
	}
	for i, p := range plugins {
		if isMultus(p) {
			for _, k := range []string{"cniVersion", "name"} {
				if _, ok := p[k]; !ok && top[k] != nil {
					p[k] = top[k]
				}
			}
			return p, fmt.Sprintf(" (plugin %d of conflist %s)", i, str(top["name"])), true
		}
	}
	return nil, "", false
}

// isMultus: a Multus plugin config, or the thick Multus daemon's config,
// which has no type but names the config it generates.
func isMultus(m map[string]json.RawMessage) bool {
	t := str(m["type"])
	_, daemon := m["multusConfigFile"]
	return t == "multus" || t == "multus-shim" || (t == "" && daemon)
}

func str(raw json.RawMessage) string {
	var s string
	json.Unmarshal(raw, &s)
	return s
}

// converter carries one conversion.
type converter struct {
	in map[string]json.RawMessage
	// policyDir is the node directory holding library/ and PolicyDataFile.
	policyDir string
	res       *Result
}

// Convert maps a Multus config to plexus's. Every Multus key is either
// carried over, with a note when its meaning shifts, or listed with the
// reason it was not. policyDir is the node directory holding library/
// and PolicyDataFile (DefaultPolicyDir when empty).
func Convert(in map[string]json.RawMessage, policyDir string) (*Result, error) {
	c := &converter{in: in, policyDir: cmp.Or(policyDir, DefaultPolicyDir), res: &Result{Config: map[string]any{"type": "plexus"}}}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		if err := c.key(k, in[k]); err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
	}
	if _, ok := in["confDir"]; !ok {
		c.res.Config["confDir"] = multusConfDir
		c.note("confDir", "unset: Multus's default %s is kept (plexus's own default is %s)", multusConfDir, config.DefaultConfDir)
	}
	c.isolation()
	// Parse the result as plexus would, so that a Multus value plexus
	// refuses (a defaultNetworks file name, say) is reported here, not by
	// the first ADD.
	b, err := json.Marshal(c.res.Config)
	if err != nil {
		return nil, err
	}
	if _, err := config.Parse(b); err != nil {
		return nil, fmt.Errorf("the migrated config would not load: %w", err)
	}
	return c.res, nil
}

func (c *converter) note(key, format string, args ...any) {
	c.res.Notes = append(c.res.Notes, Note{Key: key, Reason: fmt.Sprintf(format, args...)})
}

// same is carried over unchanged.
var same = map[string]bool{
	"cniVersion": true, "name": true, "kubeconfig": true, "confDir": true, "binDir": true,
	"logFile": true, "capabilities": true, "auxiliaryCNIChainName": true,
}

func (c *converter) key(k string, raw json.RawMessage) error {
	if same[k] {
		return c.copyKey(k, k, raw)
	}
	switch k {
	case "type":
		return nil
	case "clusterNetwork":
		// Multus reads a bare name as a NAD in multusNamespace, else a config
		// file of that network name in confDir; plexus only as a NAD. Paths
		// mean the same in both.
		v := str(raw)
		c.res.Config[k] = v
		if !strings.Contains(v, "/") && !strings.HasPrefix(v, ".") {
			c.note(k, "%q is read by plexus as a NAD in systemNamespace only; Multus also accepted a config file of that network name in confDir: if that is what it names, give the file's path instead", v)
		}
	case "defaultNetworks":
		return c.refList(k, raw, func(v string) error { _, _, err := names.NADRef("NAD reference", v); return err },
			"plexus takes NAD references only, where Multus also took config file names and directories: create a NAD in systemNamespace for it")
	case "systemNamespaces":
		return c.refList(k, raw, func(v string) error { return names.Label("namespace", v) }, "not a namespace name")
	case "delegates":
		return c.delegates(raw)
	case "multusNamespace":
		return c.copyKey(k, "systemNamespace", raw)
	case "readinessindicatorfile":
		if str(raw) != "" {
			return c.copyKey(k, k, raw)
		}
		return nil
	case "logLevel":
		return c.logLevel(raw)
	case "logOptions":
		if str(c.in["logFile"]) == "" {
			c.note(k, "not carried over: there is no logFile to rotate")
			return nil
		}
		return c.copyKey(k, k, raw)
	case "logToStderr":
		c.note(k, "not needed: plexus logs to logFile when it is set, else to stderr")
	case "namespaceIsolation", "globalNamespaces":
		return nil // finish, together
	case "cniDir":
		c.note(k, "not carried over: Multus's own cache of delegate configs; plexus keeps attachment records in cacheDir (default %s). Pods attached by Multus have no plexus record: restart them (or drain each node) after the switch so their DEL detaches everything", config.DefaultCacheDir)
	case "allowTryDeleteOnErr":
		c.note(k, "not needed: plexus's DEL always continues past a failing delegate and keeps the failed ones for the next DEL")
	case "multusAutoconfigDir":
		return c.autoconfig(raw)
	case "chrootDir", "socketDir", "daemonSocketDir", "cniConfigDir", "multusConfigFile", "multusMasterCNI", "forceCNIVersion", "overrideNetworkName", "cniVersions", "perNodeCertificate":
		c.note(k, "not carried over: a setting of Multus's own daemon or config generator; plexusd and its installer have their own flags (docs/kubernetes.md)")
	default:
		c.note(k, "not carried over: not a Multus option plexus knows")
	}
	return nil
}

// decode keeps numbers as written.
func decode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

func (c *converter) copyKey(from, to string, raw json.RawMessage) error {
	var v any
	if err := decode(raw, &v); err != nil {
		return err
	}
	c.res.Config[to] = v
	if from != to {
		c.note(from, "carried over as %q", to)
	}
	return nil
}

// autoconfig: the thick Multus daemon with multusConfigFile "auto" takes
// the first CNI config in multusAutoconfigDir as the default network,
// which is what a clusterNetwork directory means to plexus.
func (c *converter) autoconfig(raw json.RawMessage) error {
	if str(c.in["multusConfigFile"]) != "auto" || c.in["clusterNetwork"] != nil || c.in["delegates"] != nil {
		c.note("multusAutoconfigDir", "not carried over: only used when multusConfigFile is \"auto\"")
		return nil
	}
	dir := str(raw)
	c.res.Config["clusterNetwork"] = dir
	c.note("multusAutoconfigDir", "carried over as clusterNetwork %q: plexus uses the first config there by file name, as Multus's generated config did. The path is as Multus's daemon saw it (in its container): give the node's path if it differs", dir)
	return nil
}

// refList carries over a list of strings, leaving out, with a note, the
// entries plexus would refuse.
func (c *converter) refList(k string, raw json.RawMessage, valid func(string) error, why string) error {
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("want a list of strings: %w", err)
	}
	out := []string{}
	for i, v := range list {
		if err := valid(v); err != nil {
			c.note(fmt.Sprintf("%s[%d]", k, i), "%q left out: %v; %s", v, err, why)
			continue
		}
		out = append(out, v)
	}
	c.res.Config[k] = out
	return nil
}

// delegates: the first element is the default network in both; Multus
// attached the others to every pod as well.
func (c *converter) delegates(raw json.RawMessage) error {
	var list []any
	if err := decode(raw, &list); err != nil {
		return fmt.Errorf("want a list of CNI configs: %w", err)
	}
	if _, has := c.in["clusterNetwork"]; has {
		c.note("delegates", "not carried over: clusterNetwork is set, and Multus ignores delegates then too")
		return nil
	}
	if len(list) == 0 {
		return nil
	}
	c.res.Config["delegates"] = list[:1]
	if len(list) > 1 {
		c.note("delegates", "only the first delegate (the default network) was carried over; Multus attached the other %d to every pod: create a NAD for each and list them in defaultNetworks", len(list)-1)
	}
	return nil
}

// logLevel: Multus's levels are debug, verbose, error and panic.
func (c *converter) logLevel(raw json.RawMessage) error {
	v := strings.ToLower(str(raw))
	switch v {
	case "debug", "error":
		c.res.Config["logLevel"] = v
	case "verbose":
		c.res.Config["logLevel"] = "info"
		c.note("logLevel", `"verbose" carried over as "info"`)
	case "panic":
		c.res.Config["logLevel"] = "error"
		c.note("logLevel", `"panic" carried over as "error" (plexus has no panic level)`)
	default:
		c.note("logLevel", "%q is not a Multus log level; plexus's default (info) applies", str(raw))
	}
	return nil
}

// isolation: namespaceIsolation becomes the library's namespace_isolation
// rule. Without globalNamespaces Multus lets every pod use the "default"
// namespace's networks; with it, only the listed namespaces.
func (c *converter) isolation() {
	var on bool
	json.Unmarshal(c.in["namespaceIsolation"], &on)
	globalRaw, hasGlobal := c.in["globalNamespaces"]
	if !on {
		if hasGlobal {
			c.note("globalNamespaces", "not carried over: it only matters with namespaceIsolation, which is off")
		}
		return
	}
	global := []string{"default"}
	if hasGlobal {
		global = nil
		for _, ns := range strings.Split(str(globalRaw), ",") {
			if ns = strings.TrimSpace(ns); ns == "" {
				continue
			}
			if err := names.Label("namespace", ns); err != nil {
				c.note("globalNamespaces", "%v: left out", err)
				continue
			}
			global = append(global, ns)
		}
	} else {
		c.note("globalNamespaces", `unset: Multus's implied global namespace "default" is listed`)
	}
	c.res.Policy = map[string]any{"plexus": map[string]any{"config": map[string]any{
		"namespace_isolation": map[string]any{"enabled": true, "global_namespaces": global},
	}}}
	c.res.Config["policy"] = map[string]any{"paths": []string{
		path.Join(c.policyDir, "library"), path.Join(c.policyDir, PolicyDataFile),
	}}
	c.note("namespaceIsolation", "carried over as the policy library's namespace_isolation rule (%s)", PolicyDataFile)
}

// Args say what "plexusctl migrate" reads and writes.
type Args struct {
	// From is a Multus config file; empty reads the ConfigMap
	// Namespace/ConfigMap through the client instead.
	From                 string
	Namespace, ConfigMap string
	// Out is where plexus.conf and the policy data go; empty prints them.
	Out       string
	PolicyDir string
	// Baseline also reports what the baseline policy would refuse.
	Baseline bool
}

// Validate says what a lacks to run, with a cluster or without one.
func (a Args) Validate(cluster bool) error {
	switch {
	case a.From == "" && !cluster:
		return errors.New("no Multus config: give --from FILE, or a cluster to read the ConfigMap from")
	case a.Baseline && !cluster:
		return errors.New("--baseline checks the cluster's pods: give --kubeconfig")
	}
	return nil
}

// Run is "plexusctl migrate": client, when not nil, is the cluster whose
// ConfigMap (unless a.From is given) and pods are read.
func Run(ctx context.Context, a Args, client kubernetes.Interface, stdout io.Writer) error {
	if err := a.Validate(client != nil); err != nil {
		return err
	}
	res, err := load(ctx, a, client)
	if err != nil {
		return err
	}
	if err := write(res, a.Out, stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Multus config: %s\n", res.Source)
	if len(res.Notes) == 0 {
		fmt.Fprintln(stdout, "every key carried over unchanged")
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stdout, "%s: %s\n", n.Key, n.Reason)
	}
	if client == nil {
		return nil
	}
	pods, err := ListPods(ctx, client)
	if err != nil {
		return err
	}
	findings := res.AnalyzePods(pods)
	fmt.Fprint(stdout, listFindings(fmt.Sprintf("pods: %d checked, %d finding(s)\n", len(pods), len(findings)), findings))
	if !a.Baseline {
		return nil
	}
	// The baseline policy as embedded in this binary.
	engine, err := policies.NewBaseline(ctx)
	if err != nil {
		return err
	}
	if findings, err = res.BaselineFindings(ctx, engine, pods); err != nil {
		return fmt.Errorf("baseline policy: %w", err)
	}
	fmt.Fprint(stdout, BaselineReport(findings, len(pods)))
	return nil
}

func load(ctx context.Context, a Args, client kubernetes.Interface) (*Result, error) {
	var m map[string]json.RawMessage
	var where string // where the Multus config was found
	if a.From != "" {
		data, err := os.ReadFile(a.From)
		if err != nil {
			return nil, err
		}
		if m, where, err = Read(data); err != nil {
			return nil, fmt.Errorf("%s: %w", a.From, err)
		}
		where = a.From + where
	} else {
		cm, err := client.CoreV1().ConfigMaps(a.Namespace).Get(ctx, a.ConfigMap, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading the Multus ConfigMap: %w", err)
		}
		if m, where, err = FromConfigMap(cm); err != nil {
			return nil, err
		}
	}
	res, err := Convert(m, a.PolicyDir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	res.Source = where
	return res, nil
}

// write puts the config (indented, keys sorted) and the policy data, if
// any, in dir, or prints them.
func write(res *Result, dir string, stdout io.Writer) error {
	conf, err := json.MarshalIndent(res.Config, "", "  ")
	if err != nil {
		return err
	}
	conf = append(conf, '\n')
	var pol []byte
	if res.Policy != nil {
		if pol, err = yaml.Marshal(res.Policy); err != nil {
			return err
		}
		pol = append([]byte("# Generated by plexusctl migrate from Multus's namespaceIsolation/globalNamespaces.\n"), pol...)
	}
	if dir == "" {
		fmt.Fprintf(stdout, "--- plexus.conf\n%s", conf)
		if pol != nil {
			fmt.Fprintf(stdout, "--- %s\n%s", PolicyDataFile, pol)
		}
		fmt.Fprintln(stdout, "---")
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "plexus.conf"), conf, 0o644); err != nil {
		return err
	}
	if pol != nil {
		return os.WriteFile(filepath.Join(dir, PolicyDataFile), pol, 0o644)
	}
	return nil
}
