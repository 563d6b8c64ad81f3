package install

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The flags as deploy/ writes them: --flag=value, a bare boolean, a
// repeated --config whose last one wins (deploy/extensions' patches).
func TestParseArgsReadsDeploysSyntax(t *testing.T) {
	getenv := func(string) string { return "" }
	o, err := ParseArgs([]string{
		"--binaries-only", "--src-bin-dir=/opt/plexus/bin", "--binaries=plexus,plexus-shim", "--cni-bin-dir=/opt/cni/bin",
		"--token-ttl=30m", `--config={"logFile":"/a"}`, `--config={"logFile":"/b"}`,
	}, getenv, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !o.BinariesOnly || o.SrcBinDir != "/opt/plexus/bin" || strings.Join(o.Binaries, ",") != "plexus,plexus-shim" ||
		o.BinDir != "/opt/cni/bin" || o.TokenTTL != 30*time.Minute || o.Extra["logFile"] != "/b" {
		t.Errorf("options %+v", o)
	}
}

func TestParseArgsRefusesWhatItDoesNotKnow(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-binaries-only"}, "unknown shorthand flag: 'b' in -binaries-only"},
		{[]string{"--binaries-only", "--nope"}, "unknown flag: --nope"},
		{[]string{"--binaries-only", "--poll=soon"}, `invalid argument "soon" for "--poll"`},
		{[]string{"--binaries-only", "extra"}, `unexpected argument "extra"`},
	} {
		if _, err := ParseArgs(tc.args, getenv, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseArgs(%v) = %v, want %q", tc.args, err, tc.want)
		}
	}
}

// ParseArgs reads `plexusctl install` flags as its cobra command does:
// the flags of AddFlags, then Options; positional arguments are refused.
func ParseArgs(args []string, getenv func(string) string, stderr io.Writer) (Options, error) {
	fs := pflag.NewFlagSet("plexusctl install", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	f := AddFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return Options{}, err
	}
	if fs.NArg() > 0 {
		return Options{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return f.Options(getenv)
}
