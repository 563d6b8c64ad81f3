package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// repoRoot is the plexus repository's root (this package is
// tools/image/images).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "mk", "image.mk")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

var mkDefault = regexp.MustCompile(`^([A-Z_]+)\s*\?=\s*(\S+)\s*$`)

// makeDefault is the default mk/image.mk gives variable name.
func makeDefault(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "mk", "image.mk"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := mkDefault.FindStringSubmatch(sc.Text()); m != nil && m[1] == name {
			return m[2]
		}
	}
	t.Fatalf("mk/image.mk sets no default for %s", name)
	return ""
}

// imageName is the name make gave an image: the environment's (make
// test-image passes its variables) or mk/image.mk's default.
func imageName(t *testing.T, variable string) string {
	t.Helper()
	if v := os.Getenv("PLEXUS_" + variable); v != "" {
		return v
	}
	return makeDefault(t, variable)
}

// plexusBin is $PLEXUS_BIN (make test sets it), or skips the test.
func plexusBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PLEXUS_BIN")
	if bin == "" {
		t.Skip("PLEXUS_BIN is unset: set it to the directory make build fills (make test-image does)")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// layerFile is one entry of an image's file system.
type layerFile struct {
	dir      bool
	mode     int64
	uid, gid int
	sha256   string
}

func (f layerFile) String() string {
	if f.dir {
		return fmt.Sprintf("dir %04o %d:%d", f.mode, f.uid, f.gid)
	}
	return fmt.Sprintf("file %04o %d:%d sha256:%.12s", f.mode, f.uid, f.gid, f.sha256)
}

// imageFiles lists every layer's entries by absolute path.
func imageFiles(t *testing.T, img v1.Image) (map[string]layerFile, map[string]bool) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]layerFile{}
	static := map[string]bool{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := "/" + strings.TrimSuffix(hdr.Name, "/")
			f := layerFile{dir: hdr.Typeflag == tar.TypeDir, mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid}
			if hdr.Typeflag == tar.TypeReg {
				data, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				f.sha256 = fmt.Sprintf("%x", sha256.Sum256(data))
				static[p] = isStaticELF(data)
			} else if !f.dir {
				t.Errorf("%s: type %q, want only files and directories", p, hdr.Typeflag)
			}
			files[p] = f
		}
		rc.Close()
	}
	return files, static
}

// isStaticELF reports whether data is an ELF executable for this machine
// with no program interpreter, which runs in an image without a libc.
func isStaticELF(data []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return false
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if f.Machine != want {
		return false
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

func fileSHA256(t *testing.T, p string) string {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(data))
}
