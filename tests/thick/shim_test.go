package thick

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestShimCallsAreCheckedAsSkelChecksThem: the shim's skel refuses what
// it refuses for any plugin, with its codes, and plexusd refuses its own
// network namespace, before anything is attached.
func TestShimCallsAreCheckedAsSkelChecksThem(t *testing.T) {
	w := harness.New(t)
	w.StartDaemon()
	w.Pod("demo", "web", "")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	tests := []struct {
		name    string
		command string
		env     []string
		conf    map[string]any
		code    uint
		want    string
	}{
		{"no CNI_PATH", "ADD", []string{"CNI_PATH="}, nil, 4, "required env variables [CNI_PATH] missing"},
		{"bad interface name", "ADD", []string{"CNI_IFNAME=../eth0"}, nil, 4, "interface name"},
		{"bad container ID", "DEL", []string{"CNI_CONTAINERID=a/b"}, nil, 4, "containerID"},
		{"version plexus does not speak", "ADD", nil, map[string]any{"cniVersion": "0.2.0"}, 1, "incompatible CNI versions"},
		{"CHECK before 0.4.0", "CHECK", nil, map[string]any{"cniVersion": "0.3.1"}, 1, "config version does not allow CHECK"},
		{"no network name", "ADD", nil, map[string]any{"name": ""}, 7, "missing network name"},
		// /proc/self is plexusd when plexusd opens it.
		{"plexusd's own network namespace", "ADD", []string{"CNI_NETNS=/proc/self/ns/net"}, nil, 8, "should not be the same"},
		{"unknown command", "FROB", nil, nil, 4, "unknown CNI_COMMAND: FROB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, e := w.PluginEdited(c, tt.command, tt.env, tt.conf)
			harness.AssertCNIError(t, e, tt.code, tt.want)
		})
	}
	w.AssertDetached(c, before)
}

// TestShimAnswersWithoutPlexusd: VERSION and a call without a command are
// answered by the shim itself; a config without daemonSocket, or with one
// plexus refuses, is refused by name.
func TestShimAnswersWithoutPlexusd(t *testing.T) {
	shim := filepath.Join(harness.BinDir, "plexus-shim")
	run := func(env []string, stdin string) (string, string, error) {
		cmd := exec.Command(shim)
		cmd.Env = env
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}
	out, _, err := run([]string{"CNI_COMMAND=VERSION"}, "")
	var v struct {
		CNIVersion        string   `json:"cniVersion"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.CNIVersion != "1.1.0" || len(v.SupportedVersions) != 5 {
		t.Errorf("VERSION: %v %q", err, out)
	}
	if _, stderr, err := run(nil, ""); err != nil || !strings.Contains(stderr, "forwards CNI calls to plexusd") {
		t.Errorf("no command: %v %q", err, stderr)
	}
	tests := []struct {
		name, conf string
		code       uint
		want       string
	}{
		{"no daemonSocket", `{"cniVersion":"1.0.0","name":"plexus"}`, 7, `needs "daemonSocket"`},
		{"not JSON", `{"name":`, 6, "error unmarshall network config: unexpected end of JSON input"},
		{"relative socket", `{"cniVersion":"1.0.0","name":"plexus","daemonSocket":"plexusd.sock"}`, 7, `"daemonSocket" "plexusd.sock" must be an absolute path`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run([]string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=c", "CNI_NETNS=/x", "CNI_IFNAME=eth0", "CNI_PATH=/x"}, tt.conf)
			var e harness.CNIError
			if err == nil || json.Unmarshal([]byte(out), &e) != nil || e.Code != tt.code || !strings.Contains(e.Msg, tt.want) {
				t.Errorf("got %v %q, want code %d with %q", err, out, tt.code, tt.want)
			}
		})
	}
}
