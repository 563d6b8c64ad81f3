package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/plexus-cni/plexus/tests/harness"
	"github.com/plexus-cni/plexus/tests/kubeenv"
)

// BenchmarkPlexusdMemory reports plexusd's resident memory against a real
// kube-apiserver: idle with nothing to cache, then with 1,000 NADs and 110
// pods on its node (the kubelet default maximum) in its caches. It runs
// once; the metrics are the result, not ns/op.
func BenchmarkPlexusdMemory(b *testing.B) {
	env := kubeenv.ForTest(b, kubeenv.Options{})
	admin := env.AdminConfig()
	cs, err := kubernetes.NewForConfig(admin)
	harness.Must(b, err)
	dyn, err := dynamic.NewForConfig(admin)
	harness.Must(b, err)
	crd, err := filepath.Abs("../../deploy/base/crd.yaml")
	harness.Must(b, err)
	harness.Must(b, env.Apply(b.Context(), false, crd))
	w := harness.New(b)
	kc := filepath.Join(w.Dir, "admin.kubeconfig")
	harness.Must(b, env.Kubeconfig(kc, admin))
	w.Set("manifests", nil)
	w.Set("kubeconfig", kc)

	d := w.StartDaemon("--node-name", "node-a")
	settle()
	idle := rssKiB(b, d)

	harness.Must(b, env.CreateNamespace(b.Context(), "load", nil))
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("net-%d", i)
		harness.Must(b, kubeenv.CreateNAD(b.Context(), dyn, "load", name, w.BridgeNADConfig(name)))
	}
	for i := 0; i < 110; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Namespace: "load",
				Labels:      map[string]string{"app": "load"},
				Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "net-1,net-2,net-3"}},
			Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "example.invalid/x"}}},
		}
		_, err := cs.CoreV1().Pods("load").Create(b.Context(), p, metav1.CreateOptions{})
		harness.Must(b, err)
	}
	settle()
	loaded := rssKiB(b, d)
	for b.Loop() {
	}
	b.ReportMetric(float64(idle)/1024, "idle-MiB")
	b.ReportMetric(float64(loaded)/1024, "1000nads-110pods-MiB")
}

// settle lets informers catch up and the Go heap settle before a reading.
func settle() { time.Sleep(3 * time.Second) }

// rssKiB reads VmRSS of plexusd from /proc.
func rssKiB(b *testing.B, d *harness.Daemon) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.Pid()))
	harness.Must(b, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, err := strconv.Atoi(f[1])
			harness.Must(b, err)
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkThinMemory reports the peak resident memory of one thin-mode
// plexus process serving the ADD of the 4-selection pod (delegates are
// separate processes and not counted).
func BenchmarkThinMemory(b *testing.B) {
	s := newSetup(b, 4)
	var peak int64
	for b.Loop() {
		out, rusage := s.w.PluginRusage(s.c, "ADD")
		if rusage == nil {
			b.Fatalf("ADD failed: %s", out)
		}
		peak = max(peak, rusage.Maxrss)
		s.w.Plugin(s.c, "DEL")
	}
	b.ReportMetric(float64(peak)/1024, "peak-MiB")
}
