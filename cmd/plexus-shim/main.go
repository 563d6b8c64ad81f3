// Command plexus-shim is thick mode's CNI plugin: it forwards every call
// to plexusd and relays the answer (package shim).
package main

import (
	"os"

	"github.com/plexus-cni/plexus/internal/shim"
)

// Version is set at build time.
var Version = "dev"

func main() {
	os.Exit(shim.Main("plexus-shim "+Version+": forwards CNI calls to plexusd", os.Environ(), os.Stdin, os.Stdout, os.Stderr))
}
