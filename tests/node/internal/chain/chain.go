// Package chain lets the node tests' recording delegates (cnispy,
// devhost) hand a call on to a real plugin once they have noted it.
package chain

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Exec replaces this process with plugin typ from CNI_PATH, its stdin
// conf, so the runtime gets the plugin's own output and exit status.
func Exec(typ string, conf []byte) error {
	var bin string
	for _, dir := range filepath.SplitList(os.Getenv("CNI_PATH")) {
		if p := filepath.Join(dir, typ); isExecutable(p) {
			bin = p
			break
		}
	}
	if bin == "" {
		return fmt.Errorf("plugin %q not found in CNI_PATH", typ)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	// The config is small (far below a pipe's buffer), so writing it all
	// before exec cannot block.
	if _, err := w.Write(conf); err != nil {
		return err
	}
	w.Close()
	if err := syscall.Dup2(int(r.Fd()), 0); err != nil {
		return err
	}
	return syscall.Exec(bin, []string{bin}, os.Environ())
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode().Perm()&0o111 != 0
}
