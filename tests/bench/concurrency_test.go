package bench

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/plexus-cni/plexus/tests/harness"
)

// BenchmarkConcurrentAdd50: 50 pods (one selection each) ADDed at once,
// as kubelet does when a node fills up, thin and thick; reports pods/s and
// the p99 ADD latency. Each iteration also DELs them (not timed).
func BenchmarkConcurrentAdd50(b *testing.B) {
	for _, mode := range []string{"thin", "thick"} {
		b.Run(mode, func(b *testing.B) {
			w := harness.New(b)
			w.BridgeNAD("demo", "net-a")
			cs := w.Pods("demo", 50, "net-a")
			if mode == "thick" {
				w.StartDaemon(deployedArgs()...)
			}
			conf, err := json.Marshal(w.Plexus)
			harness.Must(b, err)
			l := list(b, conf)
			cni := libcni.NewCNIConfigWithCacheDir([]string{harness.BinDir}, b.TempDir(), nil)
			rt := func(c *harness.Container) *libcni.RuntimeConf {
				return &libcni.RuntimeConf{ContainerID: "c-" + c.Name, NetNS: c.NS.Path(), IfName: "eth0",
					Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", c.Name}}}
			}
			var lat []time.Duration
			var wall time.Duration
			for b.Loop() {
				start := time.Now()
				lat = append(lat, addAll(b, cni, l, cs, rt)...)
				wall += time.Since(start)
				b.StopTimer()
				for _, c := range cs {
					harness.Must(b, cni.DelNetworkList(context.Background(), l, rt(c)))
				}
				b.StartTimer()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/wall.Seconds(), "pods/s")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1e3, "p99-ms")
		})
	}
}

func addAll(b *testing.B, cni *libcni.CNIConfig, l *libcni.NetworkConfigList, cs []*harness.Container, rt func(*harness.Container) *libcni.RuntimeConf) []time.Duration {
	lat := make([]time.Duration, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			if _, err := cni.AddNetworkList(context.Background(), l, rt(c)); err != nil {
				b.Error(err)
			}
			lat[i] = time.Since(start)
		}()
	}
	wg.Wait()
	return lat
}
