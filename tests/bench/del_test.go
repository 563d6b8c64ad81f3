package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/plexus-cni/plexus/tests/harness"
)

// BenchmarkDelRatio times DEL alone: plexus thin and thick against the
// delegates' own DELs run directly by the runtime (libcni in this process,
// in reverse order, as plexus runs them), with 0, 3 and 8 selections. Each
// iteration attaches, then detaches, for every setup in an order drawn
// anew. Two more timings give thick's floors: the shim's start alone
// (VERSION), which any exec'd plugin pays, and the shim's ADD and DEL
// through the runtime's libcni against a socket that answers at once
// (shimCallSteps), which any call forwarded to a daemon pays. When `make
// multus` has built it, Multus thin runs the same delegates in the same
// order too (multusSteps). Reported for DEL: each median (ms), the median
// of the paired ratios to the delegates' own DEL, and the median of the
// paired differences from it (ms); for ADD the medians, which give the
// delegates' own share of an ADD; and for both, the median of what thick
// adds beyond the delegates and each floor in the same iteration.
// Every timed ADD and DEL starts after the node has settled for the same
// pause (settlePause), as a runtime's calls do: the delegates' own DEL is
// faster right after their ADD (BenchmarkDelAfterPause), which no exec'd
// plugin can match, so back to back would favour the direct run.
//
//	go test -run '^$' -bench DelRatio -benchtime 100x ./tests/bench/
func BenchmarkDelRatio(b *testing.B) {
	pause := settlePause(b)
	for _, n := range []int{0, 3, 8} {
		b.Run(fmt.Sprintf("selections=%d", n), func(b *testing.B) {
			s := newSetup(b, n)
			floorAdd, floorDel := floorSteps(b, s)
			thinAdd, thinDel := plexusSteps(b, s, "thin")
			s.w.StartDaemon(deployedArgs()...)
			thickAdd, thickDel := plexusSteps(b, s, "thick")
			shim := shimStart(b)
			callAdd, callDel := shimCallSteps(b, s)
			runs := []delRun{{add: floorAdd, del: floorDel}, {add: thinAdd, del: thinDel}, {add: thickAdd, del: thickDel}, {add: func() {}, del: shim}, {add: callAdd, del: callDel}}
			multusAdd, multusDel := multusSteps(b, s)
			if multusAdd != nil {
				runs = append(runs, delRun{add: multusAdd, del: multusDel})
			}
			interleave(b, runs, pause, 5)
			floor, thin, thick := runs[0].t, runs[1].t, runs[2].t
			b.ReportMetric(ms(medianOf(floor)), "ms-del-delegates")
			b.ReportMetric(ms(medianOf(thin)), "ms-del-thin")
			b.ReportMetric(ms(medianOf(thick)), "ms-del-thick")
			b.ReportMetric(ms(medianOf(runs[3].t)), "ms-shim-exec")
			b.ReportMetric(medianRatio(thin, floor), "thin/delegates")
			b.ReportMetric(medianRatio(thick, floor), "thick/delegates")
			b.ReportMetric(ms(medianOf(diff(thin, floor))), "ms-thin-over-delegates")
			b.ReportMetric(ms(medianOf(diff(thick, floor))), "ms-thick-over-delegates")
			// The target's own measure: what thick adds beyond the
			// delegates and the shim's exec, paired within each iteration.
			b.ReportMetric(ms(medianOf(diff(diff(thick, floor), runs[3].t))), "ms-del-thick-beyond-shim")
			b.ReportMetric(ms(medianOf(diff(diff(runs[2].addT, runs[0].addT), runs[3].t))), "ms-add-thick-beyond-shim")
			// The same beyond the runtime's whole call of a forwarding
			// shim: what plexusd's own work adds.
			call := runs[4]
			b.ReportMetric(ms(medianOf(call.addT)), "ms-add-shim-call")
			b.ReportMetric(ms(medianOf(call.t)), "ms-del-shim-call")
			b.ReportMetric(ms(medianOf(diff(diff(runs[2].addT, runs[0].addT), call.addT))), "ms-add-thick-beyond-shim-call")
			b.ReportMetric(ms(medianOf(diff(diff(thick, floor), call.t))), "ms-del-thick-beyond-shim-call")
			// The ADDs, for the delegates' own share of an ADD's time.
			b.ReportMetric(ms(medianOf(runs[0].addT)), "ms-add-delegates")
			b.ReportMetric(ms(medianOf(runs[1].addT)), "ms-add-thin")
			b.ReportMetric(ms(medianOf(runs[2].addT)), "ms-add-thick")
			if len(runs) > 5 {
				m := runs[5]
				b.ReportMetric(ms(medianOf(m.t)), "ms-del-multus-thin")
				b.ReportMetric(medianRatio(m.t, floor), "multus-thin/delegates")
				b.ReportMetric(ms(medianOf(diff(m.t, floor))), "ms-multus-thin-over-delegates")
				b.ReportMetric(ms(medianOf(m.addT)), "ms-add-multus-thin")
			}
		})
	}
}

// interleave warms every run up once, then times each run's ADD and DEL
// once per iteration, in an order drawn anew from seed, each after pause.
func interleave(b *testing.B, runs []delRun, pause time.Duration, seed uint64) {
	for i := range runs {
		runs[i].add() // warm up: page cache, plexusd's first call
		runs[i].del()
	}
	order := rand.New(rand.NewPCG(seed, seed))
	for b.Loop() {
		for _, i := range order.Perm(len(runs)) {
			time.Sleep(pause)
			runs[i].addT = append(runs[i].addT, timed(runs[i].add))
			time.Sleep(pause)
			runs[i].t = append(runs[i].t, timed(runs[i].del))
		}
	}
}

// settlePause is the pause before each timed call: PLEXUS_BENCH_SETTLE (a
// duration; 0 runs the calls back to back), else 50ms, longer than the
// pause after which BenchmarkDelAfterPause's DEL stops slowing.
func settlePause(b *testing.B) time.Duration {
	v := os.Getenv("PLEXUS_BENCH_SETTLE")
	if v == "" {
		return 50 * time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		b.Fatalf("PLEXUS_BENCH_SETTLE=%q: want a duration such as 50ms or 0s", v)
	}
	return d
}

// BenchmarkDelAfterPause times the delegates' own DEL (the default
// network, through libcni in this process) right after their ADD and
// after a pause, idle or spinning one core. The pause, not what fills it,
// sets the DEL's time: bridge's veth teardown waits in rcu_barrier, and
// that wait is shorter right after the ADD.
//
//	go test -run '^$' -bench DelAfterPause -benchtime 200x ./tests/bench/
func BenchmarkDelAfterPause(b *testing.B) {
	s := newSetup(b, 0)
	add, del := floorSteps(b, s)
	pauses := []struct {
		name string
		d    time.Duration
		busy bool
	}{{"0", 0, false}, {"1ms", time.Millisecond, false}, {"3ms", 3 * time.Millisecond, false},
		{"10ms", 10 * time.Millisecond, false}, {"50ms", 50 * time.Millisecond, false}, {"10ms-busy", 10 * time.Millisecond, true}}
	t := make([][]time.Duration, len(pauses))
	order := rand.New(rand.NewPCG(7, 7))
	for b.Loop() {
		for _, i := range order.Perm(len(pauses)) {
			add()
			p := pauses[i]
			if p.busy {
				for start := time.Now(); time.Since(start) < p.d; {
				}
			} else {
				time.Sleep(p.d)
			}
			t[i] = append(t[i], timed(del))
		}
	}
	for i, p := range pauses {
		b.ReportMetric(ms(medianOf(t[i])), "ms-del-after-"+p.name)
	}
}

// shimCallSteps are an ADD and a DEL of one container through plexus-shim
// as the runtime runs them (libcni, its result cache included), forwarded
// to a socket in this process that answers at once: an ADD with a result
// shaped like the default network's, a DEL with nothing. That is what any
// call forwarded to a node daemon costs before the daemon does any work.
func shimCallSteps(b *testing.B, s *setup) (add, del func()) {
	sock := filepath.Join(s.w.Dir, "instant.sock")
	ln, err := net.Listen("unix", sock)
	harness.Must(b, err)
	b.Cleanup(func() { ln.Close() })
	go answerAtOnce(ln)
	conf, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "instant",
		"plugins": []any{map[string]any{"type": "plexus-shim", "daemonSocket": sock}}})
	harness.Must(b, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{harness.BinDir}, filepath.Join(s.w.Dir, "runtime-instant"), nil)
	return listSteps(b, cni, list(b, conf), podRuntimeConf(s, "instant"), "plexus-shim against an instant answer")
}

// instantResult is a bridge attachment's result with host-local's address.
const instantResult = `{"cniVersion":"1.0.0","interfaces":[{"name":"cni0","mac":"6a:1f:0e:5c:2b:01"},` +
	`{"name":"veth1a2b3c4d","mac":"2e:8c:11:47:aa:02"},{"name":"eth0","mac":"a6:44:90:3e:71:03","sandbox":"/var/run/netns/bench"}],` +
	`"ips":[{"interface":2,"address":"10.244.0.12/24","gateway":"10.244.0.1"}],"routes":[{"dst":"0.0.0.0/0","gw":"10.244.0.1"}],"dns":{}}`

// answerAtOnce serves plexusd's socket protocol with no work behind it:
// each request is read to its end and answered OK (status 'O', a 4-byte
// big-endian length, the payload), an ADD with instantResult.
func answerAtOnce(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			req, err := io.ReadAll(io.LimitReader(conn, 4<<20))
			if err != nil {
				return
			}
			var payload []byte
			if bytes.Contains(req, []byte("CNI_COMMAND=ADD")) {
				payload = []byte(instantResult)
			}
			reply := binary.BigEndian.AppendUint32([]byte("plexus-reply/1\nO"), uint32(len(payload)))
			conn.Write(append(reply, payload...))
		}()
	}
}

// delRun is one setup's ADD and DEL and their timings.
type delRun struct {
	add, del func()
	t, addT  []time.Duration
}

// shimStart is one exec of plexus-shim answering VERSION.
func shimStart(b *testing.B) func() {
	bin := filepath.Join(harness.BinDir, "plexus-shim")
	return func() {
		cmd := exec.Command(bin)
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		out, err := cmd.Output()
		if err != nil || !bytes.Contains(out, []byte(`"supportedVersions"`)) {
			b.Fatalf("%s VERSION: %v: %s", bin, err, out)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// diff is each iteration's a minus its b.
func diff(a, b []time.Duration) []time.Duration {
	d := make([]time.Duration, len(a))
	for i := range d {
		d[i] = a[i] - b[i]
	}
	return d
}

// multusSteps are the ADD and the DEL of one container through Multus thin
// ($PLEXUS_BIN/multus/multus, nil when it is not built) with the same
// delegates as the floor: with no kubeconfig Multus reads no pod and
// attaches the delegates its config lists, the first as eth0 and the
// others as net1, net2, ... in order, and detaches them in reverse.
func multusSteps(b *testing.B, s *setup) (add, del func()) {
	dir := filepath.Join(os.Getenv("PLEXUS_BIN"), "multus")
	if _, err := os.Stat(filepath.Join(dir, "multus")); os.Getenv("PLEXUS_BIN") == "" || err != nil {
		b.Logf("Multus thin not run: %v (make multus)", err)
		return nil, nil
	}
	delegates := []json.RawMessage{s.defConf}
	for _, raw := range s.nads {
		delegates = append(delegates, raw)
	}
	conf, err := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": "multus-bench", "type": "multus",
		"cniDir": filepath.Join(s.w.Dir, "multus-cache"), "binDir": harness.BinDir,
		"delegates": delegates,
	})
	harness.Must(b, err)
	cni := libcni.NewCNIConfigWithCacheDir([]string{dir}, filepath.Join(s.w.Dir, "runtime-multus"), nil)
	return listSteps(b, cni, list(b, conf), podRuntimeConf(s, "multus"), "Multus thin")
}
