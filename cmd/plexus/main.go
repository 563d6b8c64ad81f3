// Command plexus is the CNI plugin kubelet's runtime invokes: it runs the
// NPWG v1 pipeline in this process (thin mode), with the s7.4 policy and
// extension stages when its config has them. In thick mode the runtime
// runs plexus-shim, which runs plexus only for a DEL while plexusd is down.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/plexus-cni/plexus/cmd/internal/cniplugin"
	"github.com/plexus-cni/plexus/cmd/internal/stages"
)

// Version is set at build time.
var Version = "dev"

func main() {
	// SIGTERM and SIGINT cancel the call's context: it unwinds, not stops midway.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	o := cniplugin.Options{Stages: stages.Options{}.Build, Boot: cniplugin.BootID()}
	skel.PluginMainFuncs(o.Funcs(ctx, os.Stdout), cniplugin.Versions, "plexus "+Version+": NPWG multi-network CNI meta-plugin")
}
