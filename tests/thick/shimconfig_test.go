package thick

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/config"
	"github.com/plexus-cni/plexus/tests/harness"
)

// TestShimReadsDaemonKeysAsPlexusReadsThem runs the shim on configs and
// checks that it accepts exactly the daemonSocket and daemonWait values
// config.Parse accepts, with Parse's message, and forwards to the socket
// Parse reads. A CHECK with plexusd absent shows both: a refused config is
// code 7, an accepted one is code 115 naming the socket.
func TestShimReadsDaemonKeysAsPlexusReadsThem(t *testing.T) {
	dir := t.TempDir()
	for _, keys := range []string{
		`"daemonSocket":"DIR/a.sock","daemonWait":"3s"`,
		`"daemonSocket":"DIR/b.sock","ipam":{"a":[1,{"daemonSocket":"/no"}]}`,
		`"daemonSocket":"DIR/c.sock","daemonSocket":null,"daemonWait":"1m30.5s"`,
		`"daemonSocket":"DIR\/p\u00e9.sock"`,
		`"daemonSocket":"DIR/d.sock","daemonWait":"1µs"`,
		`"daemonSocket":"relative.sock"`,
		`"daemonSocket":5`,
		`"daemonSocket":"DIR/e.sock","daemonWait":"-1s"`,
		`"daemonSocket":"DIR/f.sock","daemonWait":"0s"`,
		`"daemonSocket":"DIR/g.sock","daemonWait":"soon"`,
		`"daemonSocket":"DIR/h.sock","daemonWait":10`,
	} {
		conf := `{"cniVersion":"1.0.0","name":"plexus","clusterNetwork":"/c",` + strings.ReplaceAll(keys, "DIR", dir) + `}`
		c, perr := config.Parse([]byte(conf))
		code, msg := runShimCheck(t, conf)
		switch {
		case perr != nil:
			if code != 7 || msg != perr.Error() {
				t.Errorf("%s: plexus refuses it (%v), the shim answered %d %q", conf, perr, code, msg)
			}
		case code != 115 || !strings.Contains(msg, "unreachable at "+c.DaemonSocket+":"):
			t.Errorf("%s: plexus reads socket %q, the shim answered %d %q", conf, c.DaemonSocket, code, msg)
		}
	}
}

func runShimCheck(t *testing.T, conf string) (uint, string) {
	cmd := exec.Command(filepath.Join(harness.BinDir, "plexus-shim"))
	cmd.Env = []string{"CNI_COMMAND=CHECK", "CNI_CONTAINERID=c", "CNI_IFNAME=eth0", "CNI_NETNS=/x", "CNI_PATH=/x"}
	cmd.Stdin = strings.NewReader(conf)
	out, err := cmd.Output()
	var e harness.CNIError
	if err == nil || json.Unmarshal(out, &e) != nil {
		t.Fatalf("%q: want a CNI error, got %v %q", conf, err, out)
	}
	return e.Code, e.Msg
}
