// Command plexusctl is the admin and vendor tool of plexus. Each command
// group (policy, and later ext) lives in its own file and registers in
// commandGroups; the logic stays in the library packages.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"

	"github.com/plexus-cni/plexus/core/codes"
)

// group runs one command group with the arguments after its name.
type group struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commandGroups is the dispatch table: group name → handler.
var commandGroups = map[string]group{
	"policy":  {summary: "test, check, format and evaluate s7.4 Rego policies", run: runPolicy},
	"ext":     {summary: "inspect, run and warm WebAssembly extension modules", run: runExt},
	"install": {summary: "install plexus on a node (the DaemonSet's entrypoint, s6.1)", run: runInstall},
	"migrate": {summary: "convert a Multus config to plexus's config and policy, list pods plexus treats differently", run: runMigrate},
	"explain": {summary: "explain why a pod has, or does not have, its networks", run: runExplain},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return codes.ExitUsage
	}
	g, ok := commandGroups[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "plexusctl: unknown command group %q\n", args[0])
		usage(stderr)
		return codes.ExitUsage
	}
	return g.run(ctx, args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: plexusctl GROUP COMMAND [flags] [args]")
	names := make([]string, 0, len(commandGroups))
	for n := range commandGroups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commandGroups[n].summary)
	}
}
