// Command plexus-ext-copy is the copier an extension image carries as
// /copy (package copier): `/copy DIR` copies the image's module and
// manifest into DIR, an emptyDir plexusd mounts. A missing module is
// logged and the copier exits 0: plexusd refuses that module alone, where
// a failing init container would keep plexusd from starting.
package main

import (
	"fmt"
	"os"

	"github.com/plexus-cni/plexus/extensions/copier"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: copy DIR (copies /"+copier.ModuleFile+" and /"+copier.ManifestFile+" into DIR)")
		os.Exit(2)
	}
	err := copier.Copy("/", os.Args[1], copier.Files)
	switch {
	case err == nil:
		fmt.Printf("copied %v into %s\n", copier.Files, os.Args[1])
	case copier.Missing(err):
		fmt.Fprintf(os.Stderr, "plexus-ext-copy: %v: not an extension image; plexusd will refuse this module\n", err)
	default:
		fmt.Fprintf(os.Stderr, "plexus-ext-copy: %v\n", err)
		os.Exit(1)
	}
}
