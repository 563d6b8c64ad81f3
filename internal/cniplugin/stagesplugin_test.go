package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/core/config"
)

func TestOnlyAnADDWithAPolicyOrExtensionsNeedsTheStages(t *testing.T) {
	policy := &config.Config{Policy: json.RawMessage(`{"paths":["/p"]}`)}
	extensions := &config.Config{Extensions: json.RawMessage(`{"modules":[]}`)}
	for _, tc := range []struct {
		cmd  Command
		conf *config.Config
		want bool
	}{
		{CmdAdd, policy, true},
		{CmdAdd, extensions, true},
		{CmdAdd, &config.Config{}, false},
		{CmdDel, policy, false},
		{CmdCheck, extensions, false},
		{CmdGC, policy, false},
		{CmdStatus, policy, false},
	} {
		if got := needsStages(tc.cmd, tc.conf); got != tc.want {
			t.Errorf("%s policy=%s extensions=%s: %v, want %v", tc.cmd, tc.conf.Policy, tc.conf.Extensions, got, tc.want)
		}
	}
}

// The stages plugin gets the same environment and config, and its output
// and exit status are the answer.
func TestHandOffRelaysTheStagesPlugin(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, StagesPlugin)
	script := "#!/bin/sh\necho \"$CNI_COMMAND $(cat)\"\necho to-stderr >&2\nexit \"$FAKE_STATUS\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := Options{stagesPath: fake}
	for _, status := range []string{"0", "3"} {
		var out, errOut bytes.Buffer
		err := o.handOff(context.Background(), []string{"CNI_COMMAND=ADD", "FAKE_STATUS=" + status}, []byte(`{"name":"plexus"}`), &out, &errOut)
		if out.String() != "ADD {\"name\":\"plexus\"}\n" || errOut.String() != "to-stderr\n" {
			t.Errorf("status %s: stdout %q stderr %q", status, out.String(), errOut.String())
		}
		var code exitStatus
		switch {
		case status == "0" && err != nil:
			t.Errorf("a successful stages plugin: %v", err)
		case status == "3" && (!errors.As(err, &code) || code != 3):
			t.Errorf("a stages plugin exiting 3: %v, want exit status 3", err)
		}
	}
	err := Options{stagesPath: filepath.Join(dir, "missing")}.handOff(context.Background(), nil, nil, &bytes.Buffer{}, &bytes.Buffer{})
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || !strings.Contains(te.Msg, "install it beside plexus") {
		t.Errorf("missing stages plugin: %v", err)
	}
}
