// Package copier is the layout of an extension image (plexusctl ext pack)
// and the copier every such image carries: on a node without image
// volumes an init container runs it to copy the module into an emptyDir
// that plexusd mounts. It imports nothing but the standard library, so
// the copier stays a small static binary.
package copier

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The files at an extension image's root, which the copier writes under
// the same names.
const (
	ModuleFile   = "module.wasm"
	ManifestFile = "manifest.json"
	CopierFile   = "copy"
)

// Files are what the copier copies, in order.
var Files = []string{ModuleFile, ManifestFile}

// maxFile bounds one copied file: a module is at most 64 MiB
// (extensions.MaxModuleBytes), a manifest a few hundred bytes.
const maxFile = 64 << 20

// Copy copies each of files from srcDir into dstDir, each through a
// temporary file renamed into place, so plexusd never reads a partial
// module. A missing source is reported in the error, naming it.
func Copy(srcDir, dstDir string, files []string) error {
	st, err := os.Stat(dstDir)
	if err != nil {
		return fmt.Errorf("destination: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("destination %s is not a directory", dstDir)
	}
	for _, f := range files {
		if err := copyFile(filepath.Join(srcDir, f), filepath.Join(dstDir, f)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, io.LimitReader(in, maxFile+1))
	if err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if n > maxFile {
		return fmt.Errorf("%s is more than %d bytes", src, maxFile)
	}
	if err := tmp.Chmod(0o444); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dst)
}

// Missing reports whether err is a source file that does not exist.
func Missing(err error) bool { return errors.Is(err, fs.ErrNotExist) }
