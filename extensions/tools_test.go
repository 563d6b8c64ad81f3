package extensions

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/sdk/abi"
)

// The commands themselves (plexusctl ext inspect/run/warm) are tested in
// cmd/plexusctl; these are the library calls behind them.

func TestExtInspect(t *testing.T) {
	var out bytes.Buffer
	if err := Inspect(&out, wasmPath(t, "vlan")); err != nil {
		t.Fatal(err)
	}
	var d Declaration
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "vlan" || d.Prefixes[0] != "com.example." || !(&Binary{Exports: d.Exports}).ExportedFunc("prepare") {
		t.Fatalf("inspect = %s", out.String())
	}
}

func TestExtRunPrepare(t *testing.T) {
	input := `{"pod":{"namespace":"ns","name":"p"},"network":{"namespace":"ns","name":"net","statusName":"ns/net"},
	  "ifName":"net1","config":` + bridgeConf + `,"keys":{"com.example.vlan":42}}`
	var out bytes.Buffer
	err := RunHook(context.Background(), &out, wasmPath(t, "vlan"), RunOptions{Hook: abi.HookPrepare, Input: []byte(input)})
	if err != nil || !strings.Contains(out.String(), `\"vlan\":42`) && !strings.Contains(out.String(), `"vlan": 42`) {
		t.Fatalf("error %v\nstdout %s", err, out.String())
	}
	out.Reset()
	bad := strings.Replace(input, "42", "0", 1)
	err = RunHook(context.Background(), &out, wasmPath(t, "vlan"), RunOptions{Hook: abi.HookPrepare, Input: []byte(bad)})
	if err == nil || !strings.Contains(out.String(), "between 1 and 4094, got 0") {
		t.Fatalf("error %v, stdout %s", err, out.String())
	}
	if err := RunHook(context.Background(), &out, wasmPath(t, "vlan"), RunOptions{Hook: "frobnicate", Input: []byte(input)}); err == nil || !strings.Contains(err.Error(), `unknown hook "frobnicate"`) {
		t.Fatalf("unknown hook: %v", err)
	}
}

func TestExtWarm(t *testing.T) {
	dir := t.TempDir()
	files, err := Warm(context.Background(), dir, wasmPath(t, "vlan"))
	if err != nil || len(files) != 1 {
		t.Fatalf("Warm = %v, %v; want the one module", files, err)
	}
	if _, err := Warm(context.Background(), "", wasmPath(t, "vlan")); err == nil {
		t.Fatal("Warm without a cache directory succeeded")
	}
}
