package shim

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/version"

	"github.com/plexus-cni/plexus/core/codes"
	"github.com/plexus-cni/plexus/internal/daemon"
)

// serve runs plexusd's socket server with handler on a temporary socket.
func serve(t *testing.T, handler daemon.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "plexusd.sock")
	ln, err := daemon.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = (&daemon.Server{Handler: handler}).Serve(ctx, ln)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

func run(command, conf string) (stdout, stderr string, status int) {
	var out, errOut bytes.Buffer
	env := []string{"PATH=/bin", "CNI_COMMAND=" + command, "CNI_CONTAINERID=c1", "CNI_ARGS=K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web"}
	status = Main("plexus-shim test", env, strings.NewReader(conf), &out, &errOut)
	return out.String(), errOut.String(), status
}

func TestVersionIsAnsweredAsSkelAnswersIt(t *testing.T) {
	var want bytes.Buffer
	if err := version.PluginSupports(CNIVersions...).Encode(&want); err != nil {
		t.Fatal(err)
	}
	if out, _, status := run("VERSION", ""); out != want.String() || status != 0 {
		t.Fatalf("VERSION: %d %q, want %q", status, out, want.String())
	}
	if _, stderr, status := run("", ""); status != 0 || !strings.Contains(stderr, "plexus-shim test\nCNI protocol versions supported: 0.3.0, ") {
		t.Fatalf("no command: %d %q", status, stderr)
	}
}

// plexusd's answer is printed byte for byte, with the status it implies.
func TestRepliesAreRelayedExactly(t *testing.T) {
	replies := map[string]*daemon.Reply{
		"ADD":   {Stdout: []byte(`{"cniVersion":"1.0.0"}`)},
		"CHECK": {Stdout: []byte("{\"code\":101,\n\"msg\":\"no NAD\"}"), Failed: true},
		"DEL":   {Stdout: []byte("not json"), Failed: true},
	}
	sock := serve(t, func(_ context.Context, c *daemon.Call) *daemon.Reply {
		if !strings.Contains(string(c.Stdin), "daemonSocket") || c.Env["PATH"] != "" {
			return &daemon.Reply{Stdout: []byte(`{"code":999,"msg":"the call was not forwarded as it came"}`), Failed: true}
		}
		return replies[c.Env["CNI_COMMAND"]]
	})
	conf := `{"daemonSocket":"` + sock + `"}`
	if out, _, status := run("ADD", conf); out != `{"cniVersion":"1.0.0"}` || status != 0 {
		t.Errorf("ADD: %d %q", status, out)
	}
	if out, _, status := run("CHECK", conf); out != "{\"code\":101,\n\"msg\":\"no NAD\"}" || status != 1 {
		t.Errorf("CHECK: %d %q", status, out)
	}
	out, _, status := run("DEL", conf)
	assertCNIError(t, out, status, codes.Internal, "plexusd returned an unreadable error: not json")
}

func TestWithoutPlexusd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	out, _, status := run("CHECK", `{"daemonSocket":"`+sock+`"}`)
	assertCNIError(t, out, status, codes.DaemonUnreachable, "plexusd is unreachable at "+sock+": connecting: ")
	out, _, status = run("ADD", `{"daemonSocket":"`+sock+`","daemonWait":"50ms"}`)
	assertCNIError(t, out, status, codes.DaemonUnreachable, "pod demo/web: plexusd is unreachable at "+sock+": connecting: ")
	if !strings.HasSuffix(strings.TrimSpace(out), `(waited 50ms)"`+"\n}") {
		t.Errorf("ADD does not say how long it waited: %s", out)
	}
}

func TestBadConfigsAreRefusedByName(t *testing.T) {
	for conf, want := range map[string]string{
		`{"cniVersion":"1.0.0"}`:                     `plexus-shim needs "daemonSocket"; use the plexus plugin for thin mode`,
		`{"name":`:                                   "plexus config is not a JSON object: unexpected end of JSON input",
		`{"daemonSocket":"p.sock"}`:                  `plexus config: "daemonSocket" "p.sock" must be an absolute path`,
		`{"daemonSocket":"/p.sock","daemonWait":20}`: `plexus config: "daemonWait": 20 is not a duration string`,
	} {
		out, _, status := run("ADD", conf)
		assertCNIError(t, out, status, codes.InvalidNetworkConfig, want)
	}
	out, _, status := run("ADD", `{"daemonSocket":"/p.sock","x":"`+strings.Repeat("x", 4<<20)+`"}`)
	assertCNIError(t, out, status, codes.InvalidNetworkConfig, "reading the config from stdin: over the limit")
}

func assertCNIError(t *testing.T, out string, status int, code uint, prefix string) {
	t.Helper()
	var e struct {
		Code uint   `json:"code"`
		Msg  string `json:"msg"`
	}
	if err := json.Unmarshal([]byte(out), &e); err != nil || status != 1 || e.Code != code || !strings.HasPrefix(e.Msg, prefix) {
		t.Errorf("got %d %s (%v), want code %d with %q", status, out, err, code, prefix)
	}
}
