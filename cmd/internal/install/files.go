package install

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/version"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/core/pipeline"
)

// InstallBinaries copies each binary to BinDir, never half-written.
func (in *Installer) InstallBinaries() error {
	for _, b := range in.o.Binaries { // plain file names: New checked them
		src, dst := filepath.Join(in.o.SrcBinDir, b), filepath.Join(in.o.BinDir, b)
		changed, err := copyIfChanged(src, dst, 0o755)
		if err != nil {
			return fmt.Errorf("binary %s: %w", b, err)
		}
		if changed {
			in.o.Log.Info("installed binary", "path", dst)
		}
	}
	return nil
}

// copyIfChanged copies src over dst (writeIfChanged).
func copyIfChanged(src, dst string, mode os.FileMode) (bool, error) {
	f, err := os.Open(src)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return writeIfChanged(dst, f, mode)
}

// writeKubeconfig writes the plugin's kubeconfig, read on every call.
func (in *Installer) writeKubeconfig(ctx context.Context) error {
	token, err := os.ReadFile(in.o.TokenFile)
	if err != nil {
		return fmt.Errorf("ServiceAccount token: %w", err)
	}
	ca, err := os.ReadFile(in.o.CAFile)
	if err != nil {
		return fmt.Errorf("ServiceAccount CA: %w", err)
	}
	token = bytes.TrimSpace(token)
	if len(token) == 0 {
		return fmt.Errorf("ServiceAccount token %s is empty", in.o.TokenFile)
	}
	const name = "plexus"
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: in.o.Server, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: in.kubeconfigToken(ctx, string(token))}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(in.o.Kubeconfig), 0o755); err != nil {
		return err
	}
	changed, err := writeIfChanged(in.o.Kubeconfig, bytes.NewReader(data), 0o600) // a credential
	if changed {
		in.o.Log.Info("wrote kubeconfig", "path", in.o.Kubeconfig)
	}
	return err
}

// reconcileConfig writes plexus's config while the default network's
// exists and removes it while it does not (s6.1). With Immediate (s6.1.2)
// it exists from the start, naming the default network's directory; until
// a default config appears it carries 1.0.0 and no capabilities.
func (in *Installer) reconcileConfig() error {
	ours := filepath.Join(in.o.ConfDir, in.o.ConfName)
	def, raw, err := in.findDefault()
	if err != nil {
		return err
	}
	defer in.observe(ours, def, raw)
	clusterNetwork, msg, attrs := def, "wrote plexus's CNI config", []any{"path", ours, "clusterNetwork", def}
	switch {
	case in.o.Immediate:
		clusterNetwork, msg, attrs = in.o.DefaultConfDir, "wrote plexus's CNI config (s6.1.2: attachments wait for the default network)", attrs[:2]
		if raw == nil {
			raw = []byte(`{"cniVersion":"1.0.0","name":"pending","type":"pending"}`)
		}
	case def == "":
		if err := os.Remove(ours); err == nil {
			in.o.Log.Warn("the default network's config is gone: removed plexus's (s6.1)", "path", ours)
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		in.o.Log.Info("waiting for the cluster-wide default network's CNI config (s6.1)", "dir", in.o.DefaultConfDir)
		return nil
	case in.o.ConfDir == in.o.DefaultConfDir && filepath.Base(def) < in.o.ConfName:
		return fmt.Errorf("the default network's config %s sorts before %s, so kubelet would not use plexus: choose a config name that sorts first", def, in.o.ConfName)
	}
	data, err := in.plexusConfig(clusterNetwork, raw)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(in.o.ConfDir, 0o755); err != nil {
		return err
	}
	changed, err := writeIfChanged(ours, bytes.NewReader(data), 0o644)
	if changed {
		in.o.Log.Info(msg, attrs...)
	}
	return err
}

// findDefault is the first CNI config in DefaultConfDir not plexus's, or "".
func (in *Installer) findDefault() (string, []byte, error) {
	entries, err := os.ReadDir(in.o.DefaultConfDir)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	for _, e := range entries { // sorted by name
		isConf := slices.Contains([]string{".conf", ".conflist", ".json"}, filepath.Ext(e.Name()))
		if !isConf || !e.Type().IsRegular() || e.Name() == in.o.ConfName {
			continue
		}
		p := filepath.Join(in.o.DefaultConfDir, e.Name())
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		c, err := parseConf(raw)
		if err != nil {
			// Possibly half-written: the next pass looks again.
			in.o.Log.Info("skipping unreadable CNI config", "path", p, "err", err)
			continue
		}
		if !c.isPlexus() {
			return p, raw, nil
		}
	}
	return "", nil, nil
}

// conf is what the installer reads of a CNI config.
type conf struct {
	CNIVersion string            `json:"cniVersion"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	IPAM       json.RawMessage   `json:"ipam"` // read by types alone
	Caps       map[string]bool   `json:"capabilities"`
	Plugins    []json.RawMessage `json:"plugins"`
	plugins    []conf
}

func parseConf(raw []byte) (*conf, error) {
	var c conf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if c.Plugins == nil {
		c.plugins = []conf{c}
		return &c, nil
	}
	for i, p := range c.Plugins {
		var pc conf
		if err := json.Unmarshal(p, &pc); err != nil {
			return nil, fmt.Errorf("plugin %d: %w", i, err)
		}
		c.plugins = append(c.plugins, pc)
	}
	if len(c.plugins) == 0 {
		return nil, errors.New("no plugins")
	}
	return &c, nil
}

func (c *conf) isPlexus() bool { return config.IsPlexusPlugin(c.plugins[0].Type) }

// types are the plugin and IPAM types the config names; nil on a bad "ipam".
func (c *conf) types() []string {
	var out []string
	for _, p := range c.plugins {
		var ipam struct {
			Type string `json:"type"`
		}
		if p.IPAM != nil && json.Unmarshal(p.IPAM, &ipam) != nil {
			return nil
		}
		for _, t := range []string{p.Type, ipam.Type} {
			if t != "" && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// capabilities are the default network's: the runtime passes runtimeConfig
// only for those plexus's config declares, for its delegates.
func (c *conf) capabilities() map[string]bool {
	out := map[string]bool{}
	for _, p := range c.plugins {
		for k, v := range p.Caps {
			if v {
				out[k] = true
			}
		}
	}
	return out
}

// plexusConfig is plexus's conflist, with the default network's capabilities.
func (in *Installer) plexusConfig(def string, raw []byte) ([]byte, error) {
	c, err := parseConf(raw)
	if err != nil {
		return nil, fmt.Errorf("default network config %s: %w", def, err)
	}
	version := cmp.Or(in.o.CNIVersion, defaultVersion(c.CNIVersion))
	plugin := map[string]any{}
	maps.Copy(plugin, in.o.Extra)
	if in.o.ExtensionsDir != "" {
		// Only modules InstallExtensions installed, at their host paths.
		delete(plugin, "extensions")
		if ext := in.extensionsConfig(); ext != nil {
			plugin["extensions"] = ext
		}
	}
	plugin["type"] = in.pluginType()
	plugin["clusterNetwork"] = def
	if !in.o.ConfigOnly {
		plugin["kubeconfig"] = in.o.Kubeconfig
		if in.o.NodeName != "" {
			// Its token is bound to this node: events name it.
			plugin["nodeName"] = in.o.NodeName
		}
	}
	if in.o.Manifests != "" {
		plugin["manifests"] = in.o.Manifests
	}
	caps := c.capabilities()
	caps[pipeline.PodAnnotationsCapability] = true
	plugin["capabilities"] = caps
	list := map[string]any{"cniVersion": version, "name": "plexus", "plugins": []any{plugin}}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// DefaultCNIVersion is the highest cniVersion the installer writes unless
// told otherwise: containerd 1.6's libcni rejects a 1.1.0 result, failing
// the sandbox after every network was attached.
const DefaultCNIVersion = "1.0.0"

// defaultVersion is the default network's cniVersion, at most DefaultCNIVersion.
func defaultVersion(def string) string {
	if above, err := version.GreaterThan(def, DefaultCNIVersion); CheckCNIVersion(def) != nil || err != nil || above {
		return DefaultCNIVersion
	}
	return def
}

// CheckCNIVersion accepts a cniVersion plexus supports.
func CheckCNIVersion(v string) error {
	supported := wire.CNIVersions // cniplugin.Versions' list, without linking the plugin (and its gRPC client) into plexusctl
	if !slices.Contains(supported, v) {
		return fmt.Errorf("cniVersion %q: plexus supports %s", v, strings.Join(supported, ", "))
	}
	return nil
}

// writeIfChanged writes data atomically unless path already has its
// bytes. Both are compared by streamed digest, never held in memory: the
// binaries are tens of megabytes and the installer's memory limit small.
func writeIfChanged(path string, data io.ReadSeeker, mode os.FileMode) (bool, error) {
	want, err := digest(data)
	if err != nil {
		return false, err
	}
	if cur, err := os.Open(path); err == nil { // absent or unreadable: (re)write it
		have, err := digest(cur)
		cur.Close()
		if err == nil && bytes.Equal(have, want) {
			return false, nil
		}
	}
	if _, err := data.Seek(0, io.SeekStart); err != nil {
		return false, err
	}
	// Through a temporary file and a rename: readers see the old file or
	// the new one, never a part.
	tmp, _, err := writeTemp(path, data, mode)
	if err == nil {
		err = os.Rename(tmp, path)
		os.Remove(tmp) // after a successful rename there is nothing left
	}
	if err != nil {
		return false, fmt.Errorf("writing %s: %w", path, err)
	}
	return true, nil
}

// digest is the SHA-256 of what r holds.
func digest(r io.Reader) ([]byte, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// writeTemp writes data to a synced temporary file beside path, never a *.conf.
func writeTemp(path string, data io.Reader, mode os.FileMode) (string, int64, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return "", 0, err
	}
	n, err := io.Copy(f, data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", 0, err
	}
	return f.Name(), n, nil
}

// pluginType is the config's "type": PluginType, else plexus.
func (in *Installer) pluginType() string { return cmp.Or(in.o.PluginType, "plexus") }
