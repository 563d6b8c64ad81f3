package extensions

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExtInspect(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := ExtCommand(context.Background(), []string{"inspect", wasmPath(t, "vlan")}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
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
	in := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(in, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := ExtCommand(context.Background(), []string{"run", wasmPath(t, "vlan"), "--hook", "prepare", "--input", in}, &out, &errOut)
	if code != 0 || !strings.Contains(out.String(), `\"vlan\":42`) && !strings.Contains(out.String(), `"vlan": 42`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
	}
	out.Reset()
	bad := strings.Replace(input, "42", "0", 1)
	_ = os.WriteFile(in, []byte(bad), 0o600)
	code = ExtCommand(context.Background(), []string{"run", "--hook", "prepare", wasmPath(t, "vlan"), "--input", in}, &out, &errOut)
	if code != 1 || !strings.Contains(out.String(), "between 1 and 4094, got 0") {
		t.Fatalf("exit %d, stdout %s", code, out.String())
	}
}

func TestExtWarmAndUsage(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := ExtCommand(context.Background(), []string{"warm", dir, wasmPath(t, "vlan")}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "compiled 1 module(s)") {
		t.Fatalf("stdout %s", out.String())
	}
	if code := ExtCommand(context.Background(), []string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Fatalf("unknown command exit %d", code)
	}
}
