package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
	"github.com/plexus-cni/plexus/core/config"
)

// TestEachCallParsesTheConfigOnce: the plugin's commands (thin plugin, DEL
// without plexusd) and plexusd's handler each parse plexus's
// config exactly once per call, on success and on failure.
func TestEachCallParsesTheConfigOnce(t *testing.T) {
	dir := t.TempDir()
	cluster := filepath.Join(dir, "default.conf")
	if err := os.WriteFile(cluster, []byte(`{"cniVersion":"1.1.0","name":"default","type":"noop"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A fake delegate: it attaches nothing and succeeds.
	noop := "#!/bin/sh\ncase \"$CNI_COMMAND\" in\nADD) echo '{\"cniVersion\":\"1.1.0\"}' ;;\n" +
		"VERSION) echo '{\"cniVersion\":\"1.1.0\",\"supportedVersions\":[\"1.1.0\"]}' ;;\nesac\n"
	if err := os.WriteFile(filepath.Join(dir, "noop"), []byte(noop), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := func(extra string) string {
		return `{"cniVersion":"1.1.0","name":"plexus","type":"plexus","clusterNetwork":"` + cluster +
			`","cacheDir":"` + filepath.Join(dir, "cache") + `","logFile":"` + filepath.Join(dir, "log") + `"` + extra + `}`
	}
	absentSocket := `,"daemonSocket":"` + filepath.Join(dir, "plexusd.sock") + `","daemonWait":"1ms"`
	shimConf := strings.Replace(conf(absentSocket), `"type":"plexus"`, `"type":"plexus-shim"`, 1)
	tests := []struct {
		name    string
		command string
		conf    string
		handler bool   // plexusd's side instead of the binary's
		code    uint   // 0: the call succeeds
		msg     string // part of the error
	}{
		{"ADD", "ADD", conf(""), false, 0, ""},
		{"DEL without a record", "DEL", conf(""), false, 0, ""},
		{"GC", "GC", conf(""), false, 0, ""},
		{"STATUS", "STATUS", conf(""), false, 0, ""},
		{"the shim's DEL with plexusd down runs here", "DEL", shimConf, false, 0, ""},
		{"daemonSocket in a config of type plexus", "ADD", conf(absentSocket), false, types.ErrInvalidNetworkConfig, `"daemonSocket" is set but "type" is "plexus"`},
		{"refused config", "DEL", conf(`,"bogus":1`), false, types.ErrInvalidNetworkConfig, `"bogus"`},
		{"CNI_ARGS skel leaves to the plugin", "DEL", conf(""), false, types.ErrInvalidEnvironmentVariables, "CNI_ARGS"},
		{"plexusd's ADD", "ADD", conf(""), true, 0, ""},
		{"plexusd's DEL", "DEL", conf(""), true, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &skel.CmdArgs{ContainerID: "c1", Netns: filepath.Join(dir, "no-netns"), IfName: "eth0", Path: dir, StdinData: []byte(tt.conf)}
			if tt.code == types.ErrInvalidEnvironmentVariables {
				a.Args = "K8S_POD_NAME=web;UNKNOWN=1"
			}
			parses := 0
			o := Options{parse: func(b []byte) (*config.Config, error) { parses++; return config.Parse(b) }}
			var stdout []byte
			var err error
			if tt.handler {
				r := o.Handle(context.Background(), wire.NewCall(tt.command, a))
				stdout = r.Stdout
				if r.Failed {
					var e types.Error
					if jerr := json.Unmarshal(r.Stdout, &e); jerr != nil {
						t.Fatalf("unreadable error %q", r.Stdout)
					}
					err = &e
				}
			} else {
				cmd, perr := ParseCommand(tt.command)
				if perr != nil {
					t.Fatal(perr)
				}
				var out bytes.Buffer
				err = o.plugin(context.Background(), cmd, a, &out)
				stdout = out.Bytes()
			}
			if parses != 1 {
				t.Errorf("parsed the config %d times, want once", parses)
			}
			checkOutcome(t, err, stdout, tt.code, tt.msg)
			if tt.code == 0 && tt.command == "ADD" && !bytes.Contains(stdout, []byte(`"cniVersion": "1.1.0"`)) {
				t.Errorf("ADD printed %q, want the result", stdout)
			}
		})
	}
}

func checkOutcome(t *testing.T, err error, stdout []byte, code uint, msg string) {
	t.Helper()
	if code == 0 {
		if err != nil {
			t.Errorf("failed: %v", err)
		}
		return
	}
	var te *types.Error
	if e, ok := err.(*types.Error); ok {
		te = e
	}
	if te == nil || te.Code != code || !strings.Contains(te.Msg+te.Details, msg) {
		t.Errorf("error %v (stdout %q), want code %d with %q", err, stdout, code, msg)
	}
}
