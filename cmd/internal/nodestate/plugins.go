package nodestate

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
)

// MaxPlugins bounds the plugin types checked and reported (the CRD's
// missingPlugins.maxItems).
const MaxPlugins = 64

// pluginName is a CNI plugin type that names a file in a bin dir: no
// path separators, no dot files. Anything else is never looked up.
var pluginName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// IsPluginName reports whether t can name a plugin file in a bin dir.
func IsPluginName(t string) bool { return pluginName.MatchString(t) }

// MissingPlugins are the types, sorted and without repeats, that name an
// executable file in none of binDirs. Types that are not file names are
// skipped; at most MaxPlugins types are checked.
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
	for _, d := range binDirs {
		if d == "" {
			continue
		}
		fi, err := os.Stat(filepath.Join(d, plugin))
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return true
		}
	}
	return false
}
