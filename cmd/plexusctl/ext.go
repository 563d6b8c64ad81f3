package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/plexus-cni/plexus/extensions"
	"github.com/plexus-cni/plexus/extensions/pack"
)

// newExtCmd is "plexusctl ext": inspect, run and warm extension modules,
// and pack one into an OCI image.
func newExtCmd(a *app) *cobra.Command {
	c := newGroupCmd("ext", "inspect, run, warm and pack WebAssembly extension modules",
		newExtInspectCmd(), newExtRunCmd(), newExtWarmCmd(), newExtPackCmd())
	c.Example = examples(a.name,
		"ext inspect bin/extensions/vlan.wasm",
		"ext run bin/extensions/vlan.wasm --hook prepare --input input.json",
		"ext warm /var/cache/plexus bin/extensions",
		"ext pack --wasm bin/extensions/vlan.wasm -o vlan.tar")
	return c
}

func newExtInspectCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect MODULE.wasm",
		Short: "print a module's declaration, imports and exports as JSON",
		Args:  argsBetween(1, 1, "name the module"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return failed(extensions.Inspect(cmd.OutOrStdout(), args[0]))
		},
	}
}

func newExtRunCmd() *cobra.Command {
	var hook, input, config, memory string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "run MODULE.wasm --hook prepare|enrich --input FILE",
		Short: "run one hook as plexus would, and print what plexus would do with the answer",
		Long: `Run one hook of the module through the host plexus uses, on the attachment
an input document describes (sdk/ABI.md), and print the changed config and
args, or the enriched status entry, with the warnings; exit 1 when the
hook fails.`,
		Args: argsBetween(1, 1, "name the module"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case hook == "" || input == "":
				return usageErrorf("run needs --hook and --input")
			case timeout < 0:
				return usageErrorf("--timeout %s is negative", timeout)
			}
			var in []byte
			var err error
			if input == "-" { // stdin, up to 16 MiB
				in, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), 16<<20))
			} else {
				in, err = os.ReadFile(input)
			}
			if err != nil {
				return failed(fmt.Errorf("--input: %w", err))
			}
			mc := extensions.ModuleConfig{Timeout: extensions.Duration(timeout), MemoryLimit: memory}
			if config != "" {
				if mc.Config, err = os.ReadFile(config); err != nil {
					return failed(fmt.Errorf("--config: %w", err))
				}
			}
			opts := extensions.RunOptions{Hook: hook, Input: in, Module: mc}
			return failed(extensions.RunHook(cmd.Context(), cmd.OutOrStdout(), args[0], opts))
		},
	}
	fs := c.Flags()
	fs.StringVar(&hook, "hook", "", "prepare or enrich")
	fs.StringVar(&input, "input", "", "hook input document (JSON); - for stdin")
	fs.StringVar(&config, "config", "", "module config (JSON file); default: the input's moduleConfig")
	fs.DurationVar(&timeout, "timeout", 0, "per-call deadline")
	fs.StringVar(&memory, "memory", "", "memory limit, like 64Mi")
	return c
}

func newExtWarmCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "warm CACHEDIR MODULE.wasm|DIR...",
		Short: "compile modules into the compilation cache thin-mode CNI calls load",
		Args:  argsBetween(2, -1, "name a cache directory and modules"),
		RunE: func(cmd *cobra.Command, args []string) error {
			start := time.Now()
			files, err := extensions.Warm(cmd.Context(), args[0], args[1:]...)
			if err != nil {
				return failed(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "compiled %d module(s) into %s in %s\n", len(files), args[0], time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

func newExtPackCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "pack --wasm MODULE.wasm [--tag REF] (-o IMAGE.tar | --push)",
		Short: "check a module as plexusd would, then pack it into an OCI image",
		Long: `Check the module as plexusd would, then pack it into an OCI image with the
static copier, and print the image's description as JSON. The image's
timestamps are $SOURCE_DATE_EPOCH, else the Unix epoch.`,
		Args: noArgs,
	}
	opts := pack.AddFlags(c.Flags())
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := opts.Check(); err != nil {
			return usageError(err)
		}
		return failed(pack.Run(cmd.Context(), *opts, cmd.OutOrStdout()))
	}
	return c
}
