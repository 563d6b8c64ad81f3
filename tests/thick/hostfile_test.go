package thick

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/tests/harness"
)

// TestThickDelegateReadsAHostFile: a delegate run by plexusd reads a file
// a node agent keeps on the host, as flannel's plugin reads
// /run/flannel/subnet.env (deploy/daemonset.yaml mounts those host
// paths into plexusd's container at the same paths). With the file there
// the attachment succeeds; without it the ADD fails naming the file and
// nothing stays attached, so the delegate really read it.
func TestThickDelegateReadsAHostFile(t *testing.T) {
	w := harness.New(t)
	d := w.StartDaemon()
	env := filepath.Join(w.Dir, "run", "flannel", "subnet.env")
	harness.Must(t, os.MkdirAll(filepath.Dir(env), 0o755))
	w.WriteFile(env, "FLANNEL_NETWORK=10.244.0.0/16\nFLANNEL_SUBNET=10.244.1.1/24\nFLANNEL_MTU=1450\n")
	w.NAD("demo", "overlay", `{"cniVersion":"1.0.0","name":"overlay","plugins":[
	  {"type":"bridge","bridge":"`+w.Bridge()+`","ipam":{"type":"host-local","subnet":"`+harness.Subnet()+`","dataDir":"`+w.IPAMDir+`"}},
	  {"type":"hostfile","path":"`+env+`","wantLine":"FLANNEL_SUBNET=10.244.1.1/24"}]}`)
	w.Pod("demo", "web", "overlay")
	c := w.Container("demo", "web")
	before := harness.HostVeths(t)
	if _, e := w.Plugin(c, "ADD"); e != nil {
		t.Fatalf("ADD with the host file in place: %+v", e)
	}
	if got := harness.IfNames(c.Links(t)); !reflect.DeepEqual(got, []string{"eth0", "net1"}) {
		t.Errorf("interfaces %v, want eth0 and net1", got)
	}
	if n := d.Metric("plexus_attachments_total", `result="ok"`); n != 2 {
		t.Errorf("plexusd made %v attachments, want 2", n)
	}
	if _, e := w.Plugin(c, "DEL"); e != nil {
		t.Fatalf("DEL: %+v", e)
	}
	w.AssertDetached(c, before)

	harness.Must(t, os.Remove(env))
	_, e := w.Plugin(c, "ADD")
	if e == nil || e.Code != 104 || !strings.Contains(e.Msg, "demo/overlay") || !strings.Contains(e.Msg, env) {
		t.Fatalf("ADD without the host file: %+v, want code 104 naming the network and the file", e)
	}
	w.AssertDetached(c, before)
}
