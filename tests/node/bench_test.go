package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// BenchmarkPodStart measures a pod's start through the API (create to
// Running, seen by a watch) on a real node, with the default network
// installed alone and with plexus thin and thick in front of the same
// default network, with 0 and 2 bridge selections. The configurations are
// interleaved within every iteration, so drift of the shared machine hits
// them alike; each reports its median in ms.
//
//	PLEXUS_E2E=1 go test -run '^$' -bench PodStart -benchtime 5x ./tests/node/
func BenchmarkPodStart(b *testing.B) {
	env := kubeenv.ForTest(b, kubeenv.Options{})
	n := Start(b, env, Options{Name: "node-bench"})
	thin := n.PlexusWorld()
	thick := n.PlexusWorld()
	thick.StartDaemon("--node-name", n.Name)
	const ns = "bench"
	harness.Must(b, env.CreateNamespace(b.Context(), ns, nil))
	for _, nad := range []string{"blue", "red"} {
		// On thin's bridges and leases; thick's pods use them too (the
		// leak checks are not run here).
		harness.Must(b, kubeenv.CreateNAD(b.Context(), n.Dyn, ns, nad, thin.BridgeNADConfig(nad)))
	}
	configs := []struct {
		name     string
		install  func()
		networks string
	}{
		{"default-alone", func() { n.InstallDefault(thin) }, ""},
		{"thin-0", func() { n.InstallPlexus(thin) }, ""},
		{"thin-2", func() { n.InstallPlexus(thin) }, "blue,red"},
		{"thick-0", func() { n.InstallPlexus(thick) }, ""},
		{"thick-2", func() { n.InstallPlexus(thick) }, "blue,red"},
	}
	times := make([][]time.Duration, len(configs))
	for i := range b.N {
		for j, c := range configs {
			c.install()
			name := fmt.Sprintf("%s-%d", c.name, i)
			start := time.Now()
			n.CreatePod(n.PodSpec(ns, name, c.networks))
			n.WaitRunning(ns, name)
			times[j] = append(times[j], time.Since(start))
			n.DeletePod(ns, name)
		}
	}
	for j, c := range configs {
		b.ReportMetric(float64(median(times[j]).Microseconds())/1000, "ms-median-"+c.name)
		b.Logf("%s: %v", c.name, times[j])
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
