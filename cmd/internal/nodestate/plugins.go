package nodestate

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
)

// MaxPlugins bounds the plugin types checked (missingPlugins.maxItems).
const MaxPlugins = 64

// pluginName is a CNI plugin type that names a file in a bin dir.
var pluginName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// IsPluginName reports whether t can name a plugin file in a bin dir.
func IsPluginName(t string) bool { return pluginName.MatchString(t) }

// MissingPlugins are the types, sorted, in none of binDirs (MaxPlugins checked).
func MissingPlugins(types, binDirs []string) []string {
	var missing []string
	seen := map[string]bool{}
	for _, t := range types {
		if seen[t] || !IsPluginName(t) || len(seen) >= MaxPlugins {
			continue
		}
		seen[t] = true
		if !present(t, binDirs) {
			missing = append(missing, t)
		}
	}
	slices.Sort(missing)
	return missing
}

func present(plugin string, binDirs []string) bool {
	return slices.ContainsFunc(binDirs, func(d string) bool {
		if d == "" {
			return false
		}
		fi, err := os.Stat(filepath.Join(d, plugin))
		return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
	})
}
