// Command misbehave is a hostile test module: its module config's "mode"
// picks one way to break the ABI's rules, so that the host's defences can
// be tested one by one.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"github.com/plexus-cni/plexus/sdk"
)

type config struct {
	Mode string `json:"mode"`
}

func init() { sdk.Register(sdk.Module{Prepare: prepare, Enrich: enrich}) }

func main() {}

// sink keeps allocations reachable so the collector cannot free them.
var sink [][]byte

func prepare(req *sdk.PrepareRequest) (*sdk.PrepareResponse, error) {
	var cfg config
	_ = req.DecodeConfig(&cfg)
	switch cfg.Mode {
	case "loop":
		for {
		}
	case "membomb":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "panic":
		panic("hostile panic")
	case "trap":
		// An address past any 32-bit wasm memory: a real out-of-bounds trap.
		*(*byte)(unsafe.Pointer(uintptr(0xfffffff0))) = 1
	case "bigoutput":
		return &sdk.PrepareResponse{Warnings: []string{strings.Repeat("x", 2<<20)}}, nil
	case "changetype":
		return withKey(req.Config, "type", "macvlan")
	case "changeargs":
		return withKey(req.Config, "args", map[string]any{"cni": map[string]any{"ips": []string{"10.0.0.9"}}})
	case "cniargs":
		return &sdk.PrepareResponse{AddCNIArgs: map[string]string{"K8S_POD_NAME": "other"}}, nil
	case "addcniargs":
		return &sdk.PrepareResponse{AddCNIArgs: map[string]string{"HOSTILE": "1"}, Warnings: []string{"added HOSTILE"}}, nil
	case "warnflood":
		ws := make([]string, 200000)
		for i := range ws {
			ws[i] = "w"
		}
		return &sdk.PrepareResponse{Warnings: ws}, nil
	case "fs":
		return nil, escape()
	case "echo":
		return &sdk.PrepareResponse{Warnings: []string{string(mustJSON(req))}}, nil
	}
	return nil, nil
}

func enrich(req *sdk.EnrichRequest) (*sdk.EnrichResponse, error) {
	var cfg config
	_ = req.DecodeConfig(&cfg)
	switch cfg.Mode {
	case "unowned":
		return &sdk.EnrichResponse{Status: map[string]any{"org.other.key": 1}}, nil
	case "reserved":
		return &sdk.EnrichResponse{Status: map[string]any{"ips": []string{"6.6.6.6"}}}, nil
	case "bigstatus":
		return &sdk.EnrichResponse{Status: map[string]any{"com.hostile.big": strings.Repeat("x", 900<<10)}}, nil
	case "panic":
		panic("hostile enrich panic")
	}
	return &sdk.EnrichResponse{Status: map[string]any{"com.hostile.seen": req.Network.StatusName}}, nil
}

func withKey(conf json.RawMessage, key string, v any) (*sdk.PrepareResponse, error) {
	d, err := sdk.ParseDelegate(conf)
	if err != nil {
		return nil, err
	}
	if err := d.Plugins()[0].Set(key, v); err != nil {
		return nil, err
	}
	out, err := d.Marshal()
	return &sdk.PrepareResponse{Config: out}, err
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// escapeFile is where a module that could write to the host would leave a
// trace for the tests to find.
const escapeFile = "/tmp/plexus-sandbox-escape"

// escape tries the host's file system, which the sandbox does not have:
// the rejection reports each attempt, and any success says ESCAPED.
func escape() error {
	var got []string
	if b, err := os.ReadFile("/etc/hostname"); err == nil {
		got = append(got, fmt.Sprintf("ESCAPED: read /etc/hostname (%d bytes)", len(b)))
	} else {
		got = append(got, "read: "+err.Error())
	}
	if err := os.WriteFile(escapeFile, []byte("x"), 0o644); err == nil {
		got = append(got, "ESCAPED: wrote "+escapeFile)
	} else {
		got = append(got, "write: "+err.Error())
	}
	if es, err := os.ReadDir("/"); err == nil {
		got = append(got, fmt.Sprintf("ESCAPED: listed / (%d entries)", len(es)))
	} else {
		got = append(got, "list: "+err.Error())
	}
	return sdk.Reject("file system: %s", strings.Join(got, "; "))
}
