package shim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/plexus-cni/plexus/cmd/internal/daemon"
	"github.com/plexus-cni/plexus/cmd/internal/daemon/wire"
	"github.com/plexus-cni/plexus/core/codes"
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

// run is one call as skel hands it to the shim: the runtime's output
// and error, which skel prints on stdout.
func run(command, conf string) (stdout string, err error) {
	var out, errOut bytes.Buffer
	a := &skel.CmdArgs{ContainerID: "c1", Netns: "/run/netns/x", IfName: "eth0", Args: "K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web", Path: "/opt/cni/bin", StdinData: []byte(conf)}
	err = Call(command, a, &out, &errOut)
	return out.String(), err
}

// plexusd gets the call skel read, and its answer is what the runtime
// sees: a result as it came, an error as the CNI error it carries.
func TestRepliesAreRelayed(t *testing.T) {
	replies := map[string]*daemon.Reply{
		"ADD":   {Stdout: []byte(`{"cniVersion":"1.0.0"}`)},
		"CHECK": {Stdout: []byte("{\"code\":101,\n\"msg\":\"no NAD\"}"), Failed: true},
		"DEL":   {Stdout: []byte("not json"), Failed: true},
	}
	sock := serve(t, func(_ context.Context, c *daemon.Call) *daemon.Reply {
		want := map[string]string{"CNI_COMMAND": c.Command(), "CNI_CONTAINERID": "c1", "CNI_NETNS": "/run/netns/x", "CNI_IFNAME": "eth0", "CNI_ARGS": "K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web", "CNI_PATH": "/opt/cni/bin"}
		if !strings.Contains(string(c.Stdin), "daemonSocket") || !reflect.DeepEqual(c.Env, want) {
			return &daemon.Reply{Stdout: []byte(`{"code":999,"msg":"the call was not forwarded as skel read it"}`), Failed: true}
		}
		return replies[c.Command()]
	})
	conf := `{"daemonSocket":"` + sock + `"}`
	if out, err := run("ADD", conf); out != `{"cniVersion":"1.0.0"}` || err != nil {
		t.Errorf("ADD: %v %q", err, out)
	}
	_, err := run("CHECK", conf)
	assertCNIError(t, err, 101, "no NAD")
	_, err = run("DEL", conf)
	assertCNIError(t, err, codes.Internal, "plexusd returned an unreadable error: not json")
}

func TestWithoutPlexusd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "nobody.sock")
	_, err := run("CHECK", `{"daemonSocket":"`+sock+`"}`)
	assertCNIError(t, err, codes.DaemonUnreachable, "plexusd is unreachable at "+sock+": connecting: ")
	_, err = run("ADD", `{"daemonSocket":"`+sock+`","daemonWait":"50ms"}`)
	assertCNIError(t, err, codes.DaemonUnreachable, "pod demo/web: plexusd is unreachable at "+sock+": connecting: ")
	if err == nil || !strings.HasSuffix(err.Error(), "(waited 50ms)") {
		t.Errorf("ADD does not say how long it waited: %v", err)
	}
}

func TestBadConfigsAreRefusedByName(t *testing.T) {
	for conf, want := range map[string]string{
		`{"cniVersion":"1.0.0"}`:                     `plexus-shim needs "daemonSocket"; use the plexus plugin for thin mode`,
		`{"name":`:                                   "plexus config is not a JSON object: unexpected end of JSON input",
		`{"daemonSocket":"p.sock"}`:                  `plexus config: "daemonSocket" "p.sock" must be an absolute path`,
		`{"daemonSocket":"/p.sock","daemonWait":20}`: `plexus config: "daemonWait": 20 is not a duration string`,
	} {
		_, err := run("ADD", conf)
		assertCNIError(t, err, codes.InvalidNetworkConfig, want)
	}
	_, err := run("ADD", `{"daemonSocket":"/p.sock","x":"`+strings.Repeat("x", 4<<20)+`"}`)
	assertCNIError(t, err, codes.InvalidNetworkConfig, "the config on stdin is over the limit")
}

func TestVersionsArePlexuss(t *testing.T) {
	if got := Versions().SupportedVersions(); !reflect.DeepEqual(got, wire.CNIVersions) {
		t.Errorf("%v, want %v", got, wire.CNIVersions)
	}
}

func assertCNIError(t *testing.T, err error, code uint, prefix string) {
	t.Helper()
	var e *types.Error
	if !errors.As(err, &e) || e.Code != code || !strings.HasPrefix(e.Msg, prefix) {
		t.Errorf("got %v, want code %d with %q", err, code, prefix)
	}
}

// closingServer takes every call and closes without answering, as a
// plexusd that dies mid-call does.
func closingServer(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "plexusd.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, conn)
			conn.Close()
		}
	}()
	return sock
}

// A call plexusd dropped: an ADD fails saying what the runtime does next;
// a DEL is finished from the record by the full plugin (which this test
// binary's directory lacks, so the attempt is what shows).
func TestPlexusdClosingMidCall(t *testing.T) {
	conf := `{"daemonSocket":"` + closingServer(t) + `"}`
	_, err := run("ADD", conf)
	assertCNIError(t, err, codes.DaemonUnreachable, "pod demo/web: plexusd closed the connection before answering at ")
	if err == nil || !strings.Contains(err.Error(), "tears the sandbox down and creates a new one") {
		t.Errorf("ADD does not say what the runtime does next: %v", err)
	}
	_, err = run("DEL", conf)
	if err == nil || !strings.Contains(err.Error(), "for a DEL without plexusd") {
		t.Errorf("DEL: %v, want the full plugin run for it", err)
	}
}
