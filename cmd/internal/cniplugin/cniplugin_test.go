package cniplugin

import (
	"os"
	"strings"
	"testing"

	"github.com/plexus-cni/plexus/core/config"
)

func TestChooseSource(t *testing.T) {
	inPod := func(k string) string {
		if k == "KUBERNETES_SERVICE_HOST" {
			return "10.96.0.1"
		}
		return ""
	}
	onHost := func(string) string { return "" }
	tests := []struct {
		name   string
		conf   config.Config
		cmd    Command
		getenv func(string) string
		want   sourceKind
	}{
		{"manifests win, even in a pod", config.Config{Manifests: "/m"}, CmdAdd, inPod, manifestsSource},
		{"manifests on DEL (status file)", config.Config{Manifests: "/m"}, CmdDel, onHost, manifestsSource},
		{"kubeconfig", config.Config{Kubeconfig: "/k"}, CmdAdd, onHost, kubeconfigSource},
		{"kubeconfig wins over in-cluster", config.Config{Kubeconfig: "/k"}, CmdCheck, inPod, kubeconfigSource},
		{"in-cluster in a pod", config.Config{}, CmdAdd, inPod, inClusterSource},
		{"nothing on a host", config.Config{}, CmdAdd, onHost, noSource},
		{"DEL never needs the API", config.Config{Kubeconfig: "/k"}, CmdDel, inPod, noSource},
		{"DEL in a pod", config.Config{}, CmdDel, inPod, noSource},
	}
	for _, tt := range tests {
		if got := chooseSource(&tt.conf, tt.cmd, tt.getenv); got != tt.want {
			t.Errorf("%s: chooseSource = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestBootIDIsTheKernels: the boot ID stamped on records is the kernel's.
func TestBootIDIsTheKernels(t *testing.T) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		t.Skipf("no %s: %v", bootIDFile, err)
	}
	if got, want := BootID(), strings.TrimSpace(string(b)); got != want || got == "" {
		t.Errorf("BootID() = %q, want %q", got, want)
	}
}
